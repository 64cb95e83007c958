"""The Pipeline pane's Target box (fake engine, tests/ui/fake_bridge.py): it lists the targets this
machine can build for, choosing or typing one asks the engine to re-apply the passes under it, a
bad one is refused with the engine's message and everything stays; results from another target go
stale; Build & Run on a target whose device is not here says so, not as a failure."""
from __future__ import annotations

from fake_bridge import open_mlp
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGraphicsOpacityEffect

from irviz.ui import themes


def _to_end(qtbot, win):
    win.bridge.request("run_to_end")
    qtbot.waitUntil(lambda: win.state.get("cursor") == 5 and not win.state.get("planned"), timeout=5000)


def _targets(box):
    return [box.itemText(i) for i in range(box.count())]


def test_the_box_lists_what_can_be_built_here_and_a_choice_sets_the_session_target(qtbot, win):
    pane, box = win.pipeline, win.pipeline.target_box
    qtbot.waitUntil(lambda: box.count() > 1, timeout=5000)
    assert _targets(box) == ["host", "x86-avx2", "aarch64", "cuda"]  # metal: no codegen here
    assert box.currentText() == "host" and box.isEditable()
    assert '"mtriple": "aarch64-linux-gnu"' in box.itemData(2, Qt.ItemDataRole.ToolTipRole)
    open_mlp(qtbot, win)
    _to_end(qtbot, win)

    box.textActivated.emit("aarch64")
    qtbot.waitUntil(lambda: win.state.get("target") == "aarch64", timeout=5000)
    assert ("set_target", {"target": "aarch64"}) in win.bridge.sent
    assert box.currentText() == "aarch64" and win.state["cursor"] == 5
    assert pane.code_target.currentText() == "aarch64"  # Count code counts for it too
    n = len(win.bridge.sent)
    assert pane.choose_target("aarch64") is None and len(win.bridge.sent) == n  # no change, no request

    # a typed JSON target that does not parse: the engine's message, the target stays aarch64
    box.setEditText('{"kind": "llvm"')
    qtbot.keyClick(box.lineEdit(), Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: "Target still aarch64:" in pane.info.text(), timeout=5000)
    assert "not valid JSON" in pane.info.text() and "hint" not in pane.info.text()
    assert win.state["target"] == "aarch64" and box.currentText() == "aarch64"
    assert ("set_target", {"target": '{"kind": "llvm"'}) in win.bridge.sent


def test_build_run_on_a_target_not_here_says_not_run_and_results_of_another_target_go_stale(qtbot, win):
    open_mlp(qtbot, win)
    _to_end(qtbot, win)
    win.run.result = None
    win.act_build_run.trigger()
    qtbot.waitUntil(lambda: win.run.result is not None, timeout=5000)
    assert win.run.verdict.text() == "PASS" and not win.run.run_slot.stale and win.run.kernels.rowCount() == 3
    win.run.plan_memory()
    qtbot.waitUntil(lambda: win.run.memory_view.plan is not None, timeout=5000)

    win.pipeline.choose_target("aarch64")
    qtbot.waitUntil(lambda: win.state.get("target") == "aarch64", timeout=5000)
    note = win.run.run_note.text()
    assert win.run.run_slot.stale and "target host" in note, note  # the host's run no longer holds
    assert isinstance(win.run.verdict.graphicsEffect(), QGraphicsOpacityEffect)

    win.last_error = None
    win.act_build_run.trigger()
    qtbot.waitUntil(lambda: win.run.verdict.text() == "BUILT, NOT RUN", timeout=5000)
    assert "built for aarch64; no such device here, not run" in win.run.status.text()
    assert themes.colors().warn in win.run.verdict.styleSheet()
    assert themes.colors().bad not in win.run.verdict.styleSheet()
    assert win.run.fields["target"].text() == "aarch64" and win.last_error is None  # no failure toast
    assert not win.run.run_slot.stale  # it is the result for what is open now
    assert win.run.kernels.rowCount() == 0  # the host run's kernel times are not aarch64's
    assert win.run.memory_view.plan is not None  # the other tabs keep theirs (greyed: another target)
    assert win.run.memory_slot.stale
    assert win.state["cursor"] == 5 and win.state["target"] == "aarch64"  # the session is as it was


def test_the_replay_recipe_carries_the_target_so_a_restarted_engine_runs_the_passes_under_it():
    from irviz.protocol.commands import COMMANDS, make_state
    from irviz.ui.bridge import EngineBridge

    bridge = EngineBridge(autostart=False, spare=False)
    steps = [{"index": 0, "pass": "import", "params": {}}, {"index": 1, "pass": "LegalizeOps", "params": {}}]
    bridge._take_state(make_state(spec="sample:mlp", steps=steps, cursor=1, target="aarch64"))
    assert bridge.recipe["target"] == "aarch64"
    assert set(bridge.recipe) - {"pass_files", "converter_files"} <= {a.name for a in COMMANDS["replay"].args}
    bridge._take_state(make_state(spec="sample:mlp", steps=steps, cursor=1))
    assert "target" not in bridge.recipe  # the host: what an older engine replays too


def test_enter_on_a_listed_target_sends_one_request(qtbot, win):
    box = win.pipeline.target_box
    qtbot.waitUntil(lambda: box.count() > 1, timeout=5000)
    open_mlp(qtbot, win)
    box.setEditText("x86-avx2")
    qtbot.keyClick(box.lineEdit(), Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: win.state.get("target") == "x86-avx2", timeout=5000)
    assert [c for c, _a in win.bridge.sent].count("set_target") == 1


def test_a_refused_target_is_notified_as_such(qtbot, win):
    open_mlp(qtbot, win)
    win.pipeline.choose_target("sparc")
    qtbot.waitUntil(lambda: win.last_error is not None, timeout=5000)
    assert "unknown target 'sparc'" in win.last_error["message"]
    assert any(m.startswith("Target not changed: unknown target") for m in win.messages)
