"""End to end: the main window with the real engine process (offscreen).

Open sample:mlp, step, check what every pane shows, select an FX node and check the highlights in
the other panes, Build & Run, export, survive an engine crash."""
from __future__ import annotations

import importlib.util
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")
if importlib.util.find_spec("irviz.core.session") is None:  # engine not there yet
    pytest.skip("irviz.core.session is not available", allow_module_level=True)


T = 180_000  # ms; the first open imports torch and TVM in the engine


@pytest.fixture
def win(qtbot, real_window):
    return real_window


def _filled(qtbot, w):
    qtbot.waitUntil(lambda: w.all_filled() or w.last_error is not None, timeout=T)
    assert w.last_error is None, w.last_error


def test_open_sample_mlp(qtbot, win):
    win.open_spec("sample:mlp")
    qtbot.waitUntil(lambda: bool(win.state.get("model")) or win.last_error is not None, timeout=T)
    _filled(qtbot, win)
    assert win.state["cursor"] == 0
    assert win.fx.table.rowCount() > 3
    targets = {win.fx.table.item(r, 2).text() for r in range(win.fx.table.rowCount())}
    assert any("linear" in t or "addmm" in t or "mm" in t for t in targets), targets
    assert "def main" in win.relax.code.toPlainText()
    assert win.relax.graph_dict["nodes"]
    assert win.pipeline.table.rowCount() == 1
    assert win.pipeline.planned_list.count() >= 1
    assert win.samples, "Samples menu filled from list_samples"


def test_step_fills_tir_and_diff(qtbot, win):
    assert win.state.get("model")
    win.act_step.trigger()
    qtbot.waitUntil(lambda: win.state.get("cursor") == 1, timeout=T)
    _filled(qtbot, win)
    assert win.state["steps"][1]["pass"] == win.pipeline.table.item(1, 1).text()
    assert win.tir.tree.topLevelItemCount() >= 1  # LegalizeOps made prim_funcs
    assert "T.prim_func" in win.tir.code.toPlainText() or "def " in win.tir.code.toPlainText()
    assert win.diff.pair == (0, 1)
    assert win.diff.view.function_box.count() >= 2  # "All" + the changed functions
    assert win.relax.added or win.relax.changed  # the step's nodes are marked in the Relax graph


def test_select_fx_node_links_relax_and_tir(qtbot, win):
    qtbot.waitUntil(lambda: bool(win.hub.provenance.fx_to_relax), timeout=T)
    prov = win.hub.provenance
    fx = next(n for n, vs in prov.fx_to_relax.items() if any(v in prov.relax_to_callee for v in vs))
    win.hub.select_fx(fx)
    relax = win.relax.linked_ids()
    assert relax and set(relax) == set(prov.fx_to_relax[fx])
    assert win.tir.linked_ids()
    callee = win.tir.linked_ids()[0]
    qtbot.waitUntil(lambda: win.tir.selected == callee and bool(win.tir.code.toPlainText()), timeout=T)
    # reverse direction
    win.hub.select_tir(callee)
    assert fx in win.fx.linked_ids()


def test_build_and_run(qtbot, win):
    win.act_build_run.trigger()
    qtbot.waitUntil(lambda: win.run.result is not None or win.run.error is not None, timeout=T)
    assert win.run.error is None, win.run.error
    assert win.run.verdict.text() == "PASS"
    assert win.run.kernels.rowCount() >= 1
    assert win.run.fields["tvm_ms"].text() != "—"


def test_export_trace(qtbot, win, tmp_path):
    win.export_to(str(tmp_path), current_only=False)
    qtbot.waitUntil(lambda: any(m.startswith("Exported") for m in win.messages) or win.last_error is not None,
                    timeout=T)
    assert win.last_error is None, win.last_error
    assert any(p.suffix == ".py" for p in tmp_path.rglob("*"))
    png = tmp_path / "relax.png"
    win.export_graph("relax", "png", str(png))
    assert png.exists() and png.stat().st_size > 0


def test_failing_open_keeps_session(qtbot, win):
    cursor = win.state["cursor"]
    win.open_spec("/nonexistent/model.py")
    qtbot.waitUntil(lambda: win.last_error is not None, timeout=T)
    assert win.last_error.get("stage") == "load"
    assert "load" in win.status_label.text()
    assert win.toast.isVisible()
    assert win.state.get("model") and win.state["cursor"] == cursor
    win.last_error = None


def test_engine_crash_is_replayed(qtbot, win):
    cursor = win.state["cursor"]
    restarted = []
    win.bridge.engineRestarted.connect(restarted.append)
    win.bridge.kill_engine()
    qtbot.waitUntil(lambda: bool(restarted), timeout=T)
    qtbot.waitUntil(lambda: win.state.get("cursor") == cursor and win.all_filled(), timeout=T)
    assert "Restarted" in win.status_label.text() or "restart" in win.status_label.text().lower()
