"""The window on big models, against the fake engine: bookkeeping nodes hidden with a remembered
toggle, any module group folds from a right-click (drawn frame or not), a failed import is
explained in every pane that needs the Relax module, a mismatch shows its error figures, and a
big graph opens on its inputs at a readable zoom."""
from __future__ import annotations

import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import networkx as nx
import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QPointF, QRectF, QSettings

from irviz.core.views.layout import layout_graph
from irviz.protocol.commands import make_state

sys.path.insert(0, os.path.dirname(__file__))
from fake_bridge import FX_GRAPH, FakeBridge, _node, open_mlp

CHECK = _node("check", "_assert_tensor_metadata", "op", 200, 0, name="check", op="call_function",
              target="aten._assert_tensor_metadata.default", module_path="", args=["x"])


class BigBridge(FakeBridge):
    """Answers the FX graph with (bookkeeping=True) or without its assert node, with module paths
    that nest; build_run with a mismatch whose figures are not finite."""

    def _compute(self, cmd, a):
        if cmd == "fx_graph":
            g = dict(FX_GRAPH)
            nodes = [dict(n) for n in FX_GRAPH["nodes"]]
            for n in nodes:
                if n["id"] in ("linear", "relu"):
                    n["module_path"] = n["group"] = f"model.block.{n['module_path']}"
            if a.get("bookkeeping"):
                g["hidden_bookkeeping"] = []
                nodes.append(dict(CHECK))
            else:
                g["hidden_bookkeeping"] = ["check"]
            g["nodes"] = nodes
            return g
        if cmd == "build_run":
            return {"ok": False, "allclose": False, "max_abs_error": None, "max_rel_error": 68.5,
                    "tvm_ms": 0.5, "torch_ms": 0.25, "threads": 1, "build_seconds": 0.8, "kernels": [],
                    "per_output": [{"shape": [1, 8, 32], "dtype": "float32", "max_abs": None,
                                    "max_rel": 68.5, "allclose": False},
                                   {"shape": [1, 8], "dtype": "float32", "max_abs": 0.0,
                                    "max_rel": 0.0, "allclose": True}]}
        return super()._compute(cmd, a)


@pytest.fixture
def make_win(qtbot, tmp_path):
    from irviz.ui.main_window import MainWindow

    made = []

    def make(bridge=None):
        settings = QSettings(str(tmp_path / "irviz.ini"), QSettings.Format.IniFormat)
        w = MainWindow(bridge=bridge or BigBridge(), settings=settings)
        qtbot.addWidget(w)
        w.resize(1600, 1000)
        w.show()
        made.append(w)
        return w

    yield make
    for w in made:
        w.close()


def test_bookkeeping_hidden_by_default_and_the_toggle_is_remembered(qtbot, make_win):
    win = make_win()
    open_mlp(qtbot, win)
    assert "check" not in win.fx.graph.nodes
    assert "1 bookkeeping nodes hidden" in win.fx.info.text()
    qtbot.waitUntil(lambda: win.fx.table.rowCount() == 5, timeout=5000)   # every node, the assert too
    asked = [a for c, a in win.bridge.sent if c in ("fx_graph", "relax_graph")]
    assert all(not a.get("bookkeeping") for a in asked if "fold_depth" not in a)

    win.act_bookkeeping.trigger()
    qtbot.waitUntil(lambda: "check" in win.fx.graph.nodes, timeout=5000)
    qtbot.waitUntil(win.all_filled, timeout=5000)
    assert win.relax.show_bookkeeping
    assert win.bridge.sent[-1][1].get("bookkeeping") or any(
        c == "relax_graph" and a.get("bookkeeping") for c, a in win.bridge.sent)
    win.close()

    again = make_win()
    assert again.act_bookkeeping.isChecked() and again.fx.show_bookkeeping
    open_mlp(qtbot, again)
    assert "check" in again.fx.graph.nodes


def test_any_group_folds_from_a_right_click_even_without_a_frame(qtbot, make_win):
    win = make_win()
    open_mlp(qtbot, win)
    item = win.fx.graph.nodes["linear"]
    choices = [text for text, _sig, _args in win.fx.graph.fold_choices(item)]
    assert choices == ["Fold model.block.fc1", "Fold model.block", "Fold model"]
    assert "model.block" not in win.fx.graph.groups          # no frame drawn for it
    _text, signal, args = win.fx.graph.fold_choices(item)[1]
    signal.emit(*args)
    qtbot.waitUntil(lambda: win.bridge.sent[-1][0] == "fx_graph", timeout=5000)
    assert win.bridge.sent[-1][1]["folded"] == ["model.block"]
    assert win.relax.graph.fold_choices(win.relax.graph.nodes["lv"]) == []   # fused groups do not fold


def test_failed_import_is_explained_in_every_pane(qtbot, make_win):
    win = make_win()
    err = {"node": "erfinv", "op": "aten.erfinv.default", "message": "No converter for erfinv",
           "hint": "load a converter", "model": "m"}
    win.bridge.stateChanged.emit(make_state(spec="sample:m", importer="exported_program",
                                            error={"stage": "import", "message": err["message"]},
                                            import_error=err))
    for pane in (win.relax, win.tir, win.pipeline):
        text = pane.info.text()
        assert "Import into Relax failed at FX node erfinv (aten.erfinv.default)" in text, text
        assert "No converter for erfinv" in text and "Re-import" in text
    open_mlp(qtbot, win)
    for pane in (win.relax, win.tir, win.pipeline):
        assert "failed" not in pane.info.text() and pane.info.styleSheet() == ""


def test_a_mismatch_shows_its_error_figures(qtbot, make_win):
    win = make_win()
    open_mlp(qtbot, win)
    win.run.build_run()
    qtbot.waitUntil(lambda: win.run.result is not None, timeout=5000)
    assert win.run.verdict.text() == "MISMATCH"
    assert win.run.fields["max_abs_error"].text() == "∞ / NaN"
    assert win.run.fields["max_rel_error"].text() == "68.5"
    status = win.run.status.text()
    assert "output 0 (1×8×32 float32): max abs ∞ / NaN, max rel 68.5" in status
    assert "output 1" not in status


def test_a_big_graph_opens_on_its_inputs_at_a_readable_zoom(qtbot):
    from irviz.ui.widgets.graph_items import LOD_TEXT
    from irviz.ui.widgets.graph_view import GraphView

    G = nx.DiGraph()
    for i in range(60):                       # constants and checks: sources, drawn at the top
        G.add_node(f"c{i}", kind="const", label="const")
    G.add_node("x", kind="param")
    prev = "x"
    for i in range(400):
        G.add_node(f"op{i}", kind="op", label="add")
        G.add_edge(prev, f"op{i}")
        if i < 60:
            G.add_edge(f"c{i}", f"op{i}")
        prev = f"op{i}"
    v = GraphView()
    qtbot.addWidget(v)
    v.resize(700, 600)
    v.show()
    v.set_graph(layout_graph(G))
    x = v._node_data["x"]
    assert v.zoom() >= LOD_TEXT + 0.08
    assert v.visible_scene_rect().contains(QRectF(x["x"], x["y"], x["w"], x["h"]).center())


def test_a_small_graph_opens_fitted(qtbot):
    from irviz.ui.widgets.graph_view import GraphView

    G = nx.path_graph(6, create_using=nx.DiGraph)
    v = GraphView()
    qtbot.addWidget(v)
    v.resize(700, 600)
    v.show()
    v.set_graph(layout_graph(G))
    vis = v.visible_scene_rect()
    assert all(vis.contains(QPointF(n["x"], n["y"])) for n in v._node_data.values())
