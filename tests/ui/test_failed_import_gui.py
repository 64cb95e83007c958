"""A failed import in the app (offscreen, real engine): a model whose import fails shows its FX
graph with the failing node red and the error above it; Load converters + Re-import fill the
Relax pane; the bridge re-sends converter files when it replays after a crash; FX shapes use
the Dim names."""
from __future__ import annotations

import importlib.util
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")
if importlib.util.find_spec("tvm") is None:
    pytest.skip("needs TVM in the engine", allow_module_level=True)


from irviz.core.frontend.sample_files import sample_path

T = 300_000  # ms
EXAMPLE = str(sample_path("example_converter"))


@pytest.fixture(scope="module")
def win(real_window):
    return real_window


def test_failed_import_then_converters_then_reimport(qtbot, win):
    assert not win.act_reimport.isEnabled()              # nothing captured yet
    assert win.act_load_converters.isEnabled()
    win.open_spec("sample:unsupported_op")
    qtbot.waitUntil(lambda: bool(win.state.get("import_error")) and win.fx.graph_dict is not None
                    and not win.bridge.busy, timeout=T)
    # the error: notification, status bar, FX pane text
    assert win.last_error["stage"] == "import" and win.last_error["node"] == "erfinv"
    assert "Load converters" in win.messages[-1] and "erfinv" in win.messages[-1]
    assert "erfinv" in win.status_label.text() and "Load converters" in win.status_label.text()
    assert win.fx.error_label.isVisibleTo(win) and "erfinv" in win.fx.error_label.text()
    assert "import failed" in win.windowTitle()
    # the FX graph: every node, the failing one red and selected
    assert win.fx.failed_node == "erfinv"
    item = win.fx.graph.nodes["erfinv"]
    assert item.style_kind == "failed"
    assert win.fx.graph.highlighted("failed") == {"erfinv"}
    assert win.fx.graph.selected() == "erfinv"
    assert win.fx.table.rowCount() == len(win.fx.graph.nodes) > 5
    assert win.relax.graph_dict is None or not win.relax.graph_dict.get("nodes")
    # the panes that need the Relax module say why they are empty, not "No model open"
    for pane in (win.relax, win.tir, win.pipeline):
        text = pane.info.text()
        assert "Import into Relax failed at FX node erfinv" in text and "Re-import" in text, text
        assert "No model open" not in text
    assert win.act_reimport.isEnabled()

    win.load_converters(EXAMPLE)
    qtbot.waitUntil(lambda: bool(win.bridge.converter_files), timeout=T)
    assert "Loaded converters for erfinv.default" in win.status_label.text()
    assert "Re-import" in win.status_label.text()
    win.act_reimport.trigger()
    qtbot.waitUntil(win.all_filled, timeout=T)
    assert win.state["model"] == "unsupported_op" and not win.state.get("import_error")
    assert win.relax.graph_dict["nodes"] and "def main" in win.relax.code.toPlainText()
    assert win.fx.failed_node is None and not win.fx.error_label.isVisibleTo(win)
    assert not any("failed" in p.info.text() for p in (win.relax, win.tir, win.pipeline))
    assert win.fx.graph.highlighted("failed") == set()
    assert not any(it.style_kind == "failed" for it in win.fx.graph.nodes.values())
    assert win.messages[-1].startswith("Re-imported")


def test_replay_after_a_crash_resends_the_converters(qtbot, win):
    if not win.state.get("model"):
        pytest.skip("needs the re-imported session of the previous test")
    assert win.bridge.recipe["converter_files"] == [os.path.abspath(EXAMPLE)]
    restarted = []
    win.bridge.engineRestarted.connect(restarted.append)
    old_pid = win.bridge.pid
    win.bridge.kill_engine()
    qtbot.waitUntil(lambda: bool(restarted), timeout=T)
    assert "replayed to step 0" in restarted[0], restarted
    assert win.bridge.pid != old_pid
    # the new engine imported erfinv: it had the converter file
    assert win.state["model"] == "unsupported_op" and not win.state.get("import_error")
    qtbot.waitUntil(win.all_filled, timeout=T)
    assert win.relax.graph_dict["nodes"]
    # the engine keeps the converters: opening the model again imports at once
    win.last_error = None
    win.open_spec("sample:unsupported_op")
    qtbot.waitUntil(lambda: (win.all_filled() and win.bridge.state.get("cursor") == 0
                             and not win._pending_open) or win.last_error is not None, timeout=T)
    assert win.last_error is None, win.last_error
    assert win.state["model"] == "unsupported_op" and not win.fx.error_label.isVisibleTo(win)


def test_samples_menu_lists_models_only(qtbot, win):
    qtbot.waitUntil(lambda: bool(win.samples), timeout=T)
    names = [s["name"] for s in win.samples]
    assert "unsupported_op" in names and "example_converter" not in names
    texts = [a.text() for a in win.samples_menu.actions()]
    assert "example_converter" not in texts and "dynamic_mlp" in texts


def test_fx_view_uses_dim_names(qtbot, win):
    win.open_spec("sample:dynamic_mlp")
    qtbot.waitUntil(lambda: win.state.get("model") == "dynamic_mlp" and win.all_filled(), timeout=T)
    subs = " ".join(it.sublabel for it in win.fx.graph.nodes.values())
    assert "batch" in subs and "seq" in subs
    assert not any(tok.startswith("s") and tok[1:].isdigit()
                   for tok in subs.replace("×", " ").split())
    shapes = [win.fx.table.item(r, 4).text() for r in range(win.fx.table.rowCount())]
    assert any("batch" in s for s in shapes)
