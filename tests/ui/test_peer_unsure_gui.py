"""A group whose time would pass the CPU's peak, in the Peer tab: its row says unsure (a mark and the
reason as a tooltip), sits below the ranked differences, and the tab's mark counts such groups.
Canned result: no compile."""
from __future__ import annotations

from irviz.ui.events import EventHub
from irviz.ui.panes.peer_tab import COLUMNS, PeerTab

WHY = ("Inductor's 0.122 ms for 0.231 GFLOP is 1.9 TFLOP/s, 8.1x the measured peak (235 GFLOP/s): its kernels "
       "are paired with the wrong FX nodes")


def _group(first, tvm_ms, ind_ms, unsure=None):
    diff = round(tvm_ms - ind_ms, 5)
    return {"group": first, "fx_nodes": [first, f"relu_{first}"], "tvm_kernels": [f"fused_{first}"],
            "inductor_kernels": [f"mkldnn_{first}"], "tvm_ms": tvm_ms, "inductor_ms": ind_ms, "diff_ms": diff,
            "flop": 2.3e8, "unsure": unsure, "faster": None if unsure else "tvm" if diff < 0 else "inductor"}


def result() -> dict:
    return {"compiler": "inductor", "freezing": True, "error": None, "step": 3, "tvm_ran": True, "threads": 2,
            "compile_seconds": 9.0, "total_ms": 2.7, "compiled_ms": 2.8, "reliable": True, "reason": None,
            "attribution": "split evenly", "kernels": [],
            "groups": [_group("convolution_5", 1.2, 0.6), _group("convolution_6", 1.556, 0.122, WHY),
                       _group("convolution_8", 1.0, 1.04)],
            "summary": {"tvm_loses": [], "tvm_wins": [], "tvm_loses_ms": 0.6, "tvm_wins_ms": 0.04}}


def test_an_unsure_group_is_marked_with_its_reason_and_not_ranked(qtbot):
    tab = PeerTab(lambda *a, **k: 1, EventHub(), lambda: 3, lambda: 3, lambda: None)
    qtbot.addWidget(tab)
    tab.show_result(result())
    faster, first = COLUMNS.index("faster"), COLUMNS.index("FX nodes")
    rows = [(tab.table.item(i, first).text(), tab.table.item(i, faster)) for i in range(tab.table.rowCount())]
    assert [r[0].split(" ")[0] for r in rows] == ["convolution_5", "convolution_8", "convolution_6"]
    cell = rows[-1][1]
    assert cell.text() == "⚠ unsure" and WHY in cell.toolTip()
    assert WHY in tab.table.item(2, first).toolTip()
    assert [r[1].text() for r in rows[:2]] == ["Inductor", "TVM"]
    assert tab.mark.isVisibleTo(tab) and "1 group unsure" in tab.mark.text() and WHY in tab.mark.toolTip()
    assert "Times unreliable" not in tab.mark.text()
