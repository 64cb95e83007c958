"""The toolbar's capture bar on a model nothing captured whole: it says the graph breaks were the
fallback, offers each graph (k of N, its ops and inputs), and choosing one asks the engine for it;
the window, the panes and Build & Run then belong to that graph. On the fake engine."""
from __future__ import annotations

import os

from fake_bridge import GRAPHS, open_mlp

SHOTS = os.environ.get("IRVIZ_SHOTS", "/tmp")


def _open_graph_breaks(qtbot, win):
    win.open_spec("sample:graph_breaks")
    qtbot.waitUntil(lambda: win.all_filled(), timeout=5000)


def test_the_bar_names_the_fallback_and_lists_the_graphs(qtbot, win):
    _open_graph_breaks(qtbot, win)
    bar = win.capture_bar
    assert bar.label.isVisibleTo(win) and bar.combo.isVisibleTo(win)
    assert bar.label.text() == "Captured with graph breaks: 3 graphs, showing"
    assert "nothing captured the whole model" in bar.label.toolTip()
    items = [bar.combo.itemText(i) for i in range(bar.combo.count())]
    assert items == [f"graph {g['graph']} of 3 · {g['ops']} ops · {g['inputs'][0]}" for g in GRAPHS]
    assert bar.combo.currentIndex() == 0
    assert any(m.startswith("Captured with graph breaks:") for m in win.messages)  # said on open
    assert "graph 1 of 3" in win.windowTitle()


def test_choosing_a_graph_opens_it_and_its_results_are_its_own(qtbot, win):
    _open_graph_breaks(qtbot, win)
    win.run.result = None
    win.act_build_run.trigger()
    qtbot.waitUntil(lambda: win.run.result is not None, timeout=5000)
    assert "match PyTorch on graph 1 of 3" in win.run.status.text()

    win.capture_bar.choose(2)
    assert win.bridge.sent[-1] == ("choose_graph", {"graph": 2})
    qtbot.waitUntil(lambda: win.state.get("model") == "graph_breaks graph 2 of 3", timeout=5000)
    qtbot.waitUntil(lambda: win.all_filled(), timeout=5000)
    assert win.capture_bar.combo.currentData() == 2
    assert "graph 2 of 3" in win.windowTitle() and "graph 2 of 3" in win.step_label.text()
    assert win.run.verdict.text() == ""  # graph 1's verdict is not shown as graph 2's
    win.run.result = None
    win.act_build_run.trigger()
    qtbot.waitUntil(lambda: win.run.result is not None, timeout=5000)
    assert "match PyTorch on graph 2 of 3" in win.run.status.text()
    win.grab().save(os.path.join(SHOTS, "graph_chooser_fake.png"))


def test_a_refused_choice_keeps_the_graph_shown(qtbot, win):
    _open_graph_breaks(qtbot, win)
    win.bridge.fail_next = {"cmd": "choose_graph",
                            "error": {"stage": "capture", "message": "graph 3 of 3 (graph breaks): no",
                                      "hint": None}}
    win.capture_bar.choose(3)
    qtbot.waitUntil(lambda: win.last_error is not None, timeout=5000)
    assert win.capture_bar.combo.currentData() == 1 and win.state.get("model") == "graph_breaks graph 1 of 3"


def test_a_model_captured_whole_shows_no_bar(qtbot, win):
    _open_graph_breaks(qtbot, win)
    open_mlp(qtbot, win)
    qtbot.waitUntil(lambda: win.state.get("model") == "mlp", timeout=5000)
    assert not win.capture_bar.label.isVisibleTo(win) and not win.capture_bar.combo.isVisibleTo(win)
    assert win.choose_graph(2) is None  # nothing to choose from


def test_a_replay_reopens_the_graph_that_was_open(qtbot, win):
    _open_graph_breaks(qtbot, win)
    win.capture_bar.choose(3)
    qtbot.waitUntil(lambda: win.state.get("model") == "graph_breaks graph 3 of 3", timeout=5000)
    from irviz.ui.session_replay import _frontend_recipe

    assert _frontend_recipe(win.state)["graph"] == 3
    assert "graph" not in _frontend_recipe({"capture": "export"})
