"""Run pane ▸ Intermediates with the real engine: a wrong pass, the table, the overlay on both
graphs, and "First divergence" selecting the wrong node. Saves screenshots when IRVIZ_SHOTS is set."""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

from irviz.ui.panes.intermediates_tab import error_heat, error_t, parse_tolerance

T = 180_000
WRONG_PASS = str(Path(__file__).resolve().parents[2] / "examples" / "subtract_one_add.py")


def test_log_scale_and_tolerance_field():
    assert error_t(1e-8) == 0.0 and error_t(1.0) == 1.0 and error_t(None) == 0.0
    assert error_t(1e-4) == pytest.approx(0.5)
    fx, relax = error_heat([{"fx_node": "a", "relax_var": "lv", "max_abs": 1e-2, "status": "diverges"},
                            {"fx_node": "b", "relax_var": None, "status": "unmatched"}])
    assert set(fx) == {"a"} and relax == {"lv": pytest.approx(0.75)}
    assert parse_tolerance("") is None and parse_tolerance("1e-3") == 1e-3
    with pytest.raises(ValueError):
        parse_tolerance("-1")


def test_wrong_pass_overlay_and_first_divergence(qtbot, real_window):
    w = real_window
    w.bridge.request("load_pass_file", path=WRONG_PASS)
    w.open_spec("sample:small_cnn", pipeline="SubtractOneAdd,LegalizeOps,AnnotateTIROpPattern,FoldConstant,FuseOps")
    qtbot.waitUntil(lambda: bool(w.state.get("model")) or w.last_error is not None, timeout=T)
    assert w.last_error is None, w.last_error
    w.bridge.request("jump", index=2)  # after LegalizeOps: each FX node still has its own binding
    qtbot.waitUntil(lambda: w.state.get("cursor") == 2, timeout=T)
    qtbot.waitUntil(lambda: w.all_filled() or w.last_error is not None, timeout=T)
    tab = w.run.intermediates
    w.run.tabs.setCurrentWidget(tab)
    tab.compare_button.click()
    qtbot.waitUntil(lambda: tab.result is not None or "failed" in tab.status.text(), timeout=T)
    assert tab.result is not None, tab.status.text()
    assert tab.result["first_divergence"] == "convolution"
    assert tab.table.rowCount() == len(tab.result["nodes"])
    # the overlay coloured nodes of both graphs
    assert any(it.heat is not None for it in w.fx.graph.nodes.values())
    assert any(it.heat is not None for it in w.relax.graph.nodes.values())
    tab.first_button.click()
    qtbot.waitUntil(lambda: w.hub.selection is not None and w.hub.selection.key == "convolution", timeout=5000)
    qtbot.wait(300)
    shots = os.environ.get("IRVIZ_SHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        w.grab().save(str(Path(shots) / "overlay_window.png"))
        w.run.grab().save(str(Path(shots) / "overlay_run_pane.png"))
        w.fx.grab().save(str(Path(shots) / "overlay_fx.png"))
        w.relax.grab().save(str(Path(shots) / "overlay_relax.png"))
    # a bad tolerance is refused in the pane, the last result stays
    tab.tolerance.setText("abc")
    tab.compare_button.click()
    assert "not a number" in tab.status.text() and tab.result is not None


def test_the_table_names_the_kernel_a_node_is_computed_in(qtbot):
    from irviz.ui.events import EventHub
    from irviz.ui.panes.intermediates_tab import IntermediatesTab

    tab = IntermediatesTab(ask=lambda *a, **k: None, hub=EventHub(), cursor=lambda: 3)
    qtbot.addWidget(tab)
    tab.show_result({"step": 3, "pass": "FuseTIR", "first_divergence": None, "atol": None, "seconds": {},
              "nodes": [{"order": 0, "fx_node": "addmm", "relax_var": "lv#1", "kernel": "fused_dense_relu",
                         "compared_as": "relu", "status": "unmatched", "reason": "fused away"},
                        {"order": 1, "fx_node": "relu", "relax_var": "lv#1", "kernel": "fused_dense_relu",
                         "compared_as": None, "max_abs": 1e-7, "max_rel": 1e-7, "status": "ok"}]})
    col = tab.COLUMNS.index("kernel")
    assert [tab.table.item(r, col).text() for r in range(2)] == ["fused_dense_relu"] * 2
    assert "as relu" in tab.table.item(0, col).toolTip() and not tab.table.item(1, col).toolTip()
