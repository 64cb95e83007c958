"""What the GUI says about the pipeline and the targets (fake engine, tests/ui/fake_bridge.py): a
named pipeline chosen after a step says it runs after the steps kept, a pipeline the engine refuses
at launch opens the model with zero and a dialog says why, and every target box lists the
engine's `list_targets`."""
from __future__ import annotations

import os

import pytest
from fake_bridge import FAKE_TARGETS, FakeBridge, open_mlp, step
from PySide6.QtWidgets import QMessageBox

SHOTS = "/work/notes/shots"
BUILD = ["LegalizeOps", "FuseOps", "FuseTIR", "DeadCodeElimination"]


class TwoPipelines(FakeBridge):
    """zero and a second named pipeline, which set_pipeline plans after the cursor as the engine does."""

    def _compute(self, cmd, a):
        if cmd == "list_pipelines":
            return [{"name": "zero", "description": "TVM zero pipeline",
                     "passes": [{"name": n, "params": {}} for n in self.PASSES]},
                    {"name": "default_build", "description": "TVM's default build",
                     "passes": [{"name": n, "params": {}} for n in BUILD]}]
        if cmd == "set_pipeline" and a.get("pipeline") == "default_build":
            self.applied = self.applied[:self.cursor]
            self.planned = [{"name": n, "params": {}} for n in BUILD]
            return self.state()
        return super()._compute(cmd, a)


@pytest.fixture
def two(qtbot, settings):
    from irviz.ui.main_window import MainWindow

    w = MainWindow(bridge=TwoPipelines(), settings=settings)
    qtbot.addWidget(w)
    w.resize(1600, 1000)
    w.show()
    yield w
    w.close()


def _shot(widget, name):
    os.makedirs(SHOTS, exist_ok=True)
    widget.grab().save(os.path.join(SHOTS, name))


def _items(box):
    return [box.itemText(i) for i in range(box.count())]


def test_a_named_pipeline_chosen_after_a_step_says_it_runs_after_the_steps_kept(qtbot, two):
    pane = two.pipeline
    open_mlp(qtbot, two)
    qtbot.waitUntil(lambda: pane.pipeline_box.findData("default_build") >= 0, timeout=5000)
    step(qtbot, two, 2)
    box = pane.pipeline_box
    box.setCurrentIndex(box.findData("default_build"))
    box.activated.emit(box.currentIndex())
    qtbot.waitUntil(lambda: [p["name"] for p in two.state.get("planned") or []] == BUILD, timeout=5000)
    assert ("set_pipeline", {"pipeline": "default_build"}) in two.bridge.sent
    # LegalizeOps, AnnotateTIROpPattern, then default_build: no named pipeline, yet the box names
    # the one chosen and the note says where it runs from
    assert box.currentText() == "default_build"
    assert pane.plan_note.isVisible()
    assert ("default_build planned after step 2 (steps 1–2 stay; choose it at step 0 to run it "
            "from the import)") in pane.plan_note.text()
    assert "default_build planned after step 2" in pane.info.text() and "step 2 of 6" in pane.info.text()
    _shot(two.docks["pipeline"], "pipeline_planned_after_step.png")

    step(qtbot, two)  # stepping into it keeps the pipeline what the note says
    assert box.currentText() == "default_build" and "after step 2" in pane.plan_note.text()

    pane.jump(0)
    qtbot.waitUntil(lambda: two.state.get("cursor") == 0, timeout=5000)
    box.activated.emit(box.findData("default_build"))
    qtbot.waitUntil(lambda: len(two.state.get("planned") or []) == len(BUILD)
                    and len(two.state.get("steps")) == 1, timeout=5000)
    assert box.currentText() == "default_build" and not pane.plan_note.isVisible()  # from the import

    pane.set_planned([{"name": "FuseOps"}])  # composed by hand: custom, and no note
    qtbot.waitUntil(lambda: len(two.state.get("planned") or []) == 1, timeout=5000)
    assert box.currentText() == "(custom)" and not pane.plan_note.isVisible()
    assert "planned after" not in pane.info.text()


def test_a_refused_pipeline_at_launch_opens_the_model_with_zero_and_a_dialog_says_why(qtbot, win):
    message = "pipeline text, column 1: unknown pass 'BAD'\n  BAD\n  ^"
    hint = "known pipelines: zero, course, default_build; known passes: LegalizeOps, FuseOps"
    win.bridge.fail_next = {"cmd": "open", "error": {"stage": "pipeline", "message": message, "hint": hint}}
    win.open_spec("sample:mlp", pipeline="BAD")  # what `irviz sample:mlp --pipeline BAD` does
    qtbot.waitUntil(lambda: win.state.get("model") == "mlp" and win.all_filled(), timeout=5000)
    opens = [a for c, a in win.bridge.sent if c == "open"]
    assert [a["pipeline"] for a in opens] == ["BAD", "zero"]
    assert [p["name"] for p in win.state["planned"]] == FakeBridge.PASSES

    boxes = [b for b in win.findChildren(QMessageBox) if b.isVisible()]
    assert len(boxes) == 1 and not boxes[0].isModal()  # shown without blocking the window
    box = boxes[0]
    assert "'BAD'" in box.text() and "zero pipeline" in box.text()
    assert "unknown pass 'BAD'" in box.informativeText()
    assert f"Hint: {hint}" in box.informativeText()
    _shot(box, "launch_pipeline_refused.png")

    # a refused zero is not opened again and again: the usual failure report
    win.bridge.fail_next = {"cmd": "open", "error": {"stage": "pipeline", "message": "broken", "hint": None}}
    win.open_spec("sample:mlp")
    qtbot.waitUntil(lambda: any("broken" in m for m in win.messages), timeout=5000)
    assert [a["pipeline"] for c, a in win.bridge.sent if c == "open"] == ["BAD", "zero", "zero"]


def test_every_target_box_lists_the_engines_targets(qtbot, win):
    here = [t["name"] for t in FAKE_TARGETS if not t.get("unavailable")]
    code, bar = win.pipeline.code_target, win.diff.code_bar
    qtbot.waitUntil(lambda: code.count() > 1 and bar.target_a.count() > 1, timeout=5000)
    for box in (code, bar.target_a, bar.target_b):
        assert _items(box) == here  # not a fixed list: no x86-avx512 nor webgpu this engine lacks
        assert box.currentText() == "host" and box.isEditable()
    assert '"mtriple": "aarch64-linux-gnu"' in bar.target_b.itemData(2, 3)  # the tooltip role
    assert sum(1 for c, _a in win.bridge.sent if c == "list_targets") >= 3
