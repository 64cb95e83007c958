"""The Run pane's kernel table: columns are a list, a new one is one add_column."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

KERNELS = [{"name": "add", "calls": 1, "ms": 0.1, "binding": "lv1"},
           {"name": "matmul", "calls": 2, "ms": 0.3, "binding": "lv, lv2"}]


def test_rows_sorted_by_time_and_a_click_names_the_binding(qtbot):
    from irviz.ui.panes.kernel_table import KernelTable

    t = KernelTable()
    qtbot.addWidget(t)
    t.set_kernels(KERNELS)
    assert [t.item(r, 0).text() for r in range(2)] == ["matmul", "add"]
    assert t.item(0, t.column_index("%")).text() == "75.0"
    with qtbot.waitSignal(t.bindingClicked) as sig:
        t.selectRow(0)
    assert sig.args == ["lv"]


def test_a_column_added_after_another_fills_from_the_context(qtbot):
    from irviz.ui.panes.kernel_table import Column, KernelTable, Num

    t = KernelTable()
    qtbot.addWidget(t)
    t.set_kernels(KERNELS)
    t.add_column(Column("Doubled", lambda k, c: Num(c.get("factor", 1) * k["ms"],
                                                      f"{c.get('factor', 1) * k['ms']:.1f}")), after="ms")
    col = t.column_index("Doubled")
    assert col == t.column_index("ms") + 1 and t.horizontalHeaderItem(col).text() == "Doubled"
    t.set_context(factor=2)
    assert t.kernel_at(0)["name"] == "matmul" and t.item(0, col).text() == "0.6"


def test_build_run_then_counts_of_the_runs_step_and_target_fill_the_table(qtbot, win):
    from fake_bridge import open_mlp, step

    open_mlp(qtbot, win)
    step(qtbot, win)
    t = win.run.kernels
    win.act_build_run.trigger()
    qtbot.waitUntil(lambda: win.run.result is not None, timeout=5000)
    asked = [a for cmd, a in win.bridge.sent if cmd == "kernel_code"]
    assert asked and asked[-1]["step"] == 1 and asked[-1].get("kernel") is None
    qtbot.waitUntil(lambda: t.item(0, t.column_index("Instr")).text() == "6", timeout=5000)
    assert t.item(0, t.column_index("Vector")).text() == "2 ymm"
    assert t.item(0, t.column_index("FMA")).text() == "1"
    assert "expf×1" in t.item(0, t.column_index("Calls out")).toolTip()
    assert "step 1" in t.item(0, t.column_index("Instr")).toolTip()


def test_counts_not_yet_known_or_failed_say_so(qtbot):
    from irviz.ui.panes.kernel_counts import add_count_columns
    from irviz.ui.panes.kernel_table import KernelTable

    t = KernelTable()
    qtbot.addWidget(t)
    add_count_columns(t)
    t.set_kernels(KERNELS)
    t.set_context(counts={"pending": True, "step": 3, "target_name": "x86-avx2"})
    col = t.column_index("FMA")
    assert t.item(0, col).text() == "…" and "step 3 for x86-avx2" in t.item(0, col).toolTip()
    t.set_context(counts={"error": "no llvm here"})
    assert t.item(0, col).text() == "?" and "no llvm here" in t.item(0, col).toolTip()
    t.set_context(counts={"kind": "llvm", "step": 3, "target_name": "aarch64",
                          "target": {"kind": "llvm", "mtriple": "aarch64-linux-gnu"},
                          "kernels": {"matmul": {"counts": {"vector": 9, "vector_bits": {"128": 9}}}}})
    assert t.item(0, t.column_index("Vector")).text() == "9 NEON"
    assert t.item(1, col).text() == "—"  # add: not a kernel of that step
