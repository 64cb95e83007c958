"""Every result the Run, Pipeline and Compare panes show says what it is for, and is cleared or
greyed with a note ("Stale: for step 5 of the previous pipeline") once the model, the pipeline or a
newer verdict (a bisect) makes it untrue; Write repro folder writes the step the user means; a
long text never widens the window. On the fake engine (tests/ui/fake_bridge.py)."""
from __future__ import annotations

import os

from fake_bridge import open_mlp
from PySide6.QtWidgets import QApplication

from irviz.ui.result_stamp import is_faded

SHOTS = os.environ.get("IRVIZ_SHOTS", "/tmp")


def _greyed(widget) -> bool:
    return is_faded(widget) and not widget.isEnabled()


def _to_end(qtbot, win):
    win.bridge.request("run_to_end")
    qtbot.waitUntil(lambda: win.state.get("cursor") == 5 and not win.state.get("planned"), timeout=5000)


def _build_run(qtbot, win):
    win.run.result = None
    win.act_build_run.trigger()
    qtbot.waitUntil(lambda: win.run.result is not None, timeout=5000)


def _plan_memory(qtbot, win):
    win.run.memory_view.set_plan(None)
    win.run.plan_memory()
    qtbot.waitUntil(lambda: win.run.memory_view.plan is not None, timeout=5000)


def _compare_intermediates(qtbot, win):
    win.run.intermediates.result = None
    win.run.intermediates.compare()
    qtbot.waitUntil(lambda: win.run.intermediates.result is not None, timeout=5000)


def test_another_model_clears_the_run_and_memory_results(qtbot, win):
    open_mlp(qtbot, win)
    _to_end(qtbot, win)
    _build_run(qtbot, win)
    _plan_memory(qtbot, win)
    assert win.run.verdict.text() == "PASS" and win.run.memory_view.plan["step"] == 5

    win.open_spec("sample:resnet18")
    qtbot.waitUntil(lambda: win.state.get("model") == "resnet18", timeout=5000)
    assert win.run.memory_view.plan is None  # the old model's plan is gone
    assert win.run.verdict.text() == "" and win.run.kernels.rowCount() == 0
    assert win.run.memory_slot.stamp is None and not win.run.run_note.isVisibleTo(win.run)


def test_a_pipeline_change_greys_results_for_a_step_that_no_longer_exists(qtbot, win):
    open_mlp(qtbot, win)
    _to_end(qtbot, win)
    _build_run(qtbot, win)
    _plan_memory(qtbot, win)
    _compare_intermediates(qtbot, win)
    assert not win.run.run_slot.stale

    # back to step 2: step 5 of this pipeline still exists, its results still hold
    win.pipeline.jump(2)
    qtbot.waitUntil(lambda: win.state.get("cursor") == 2, timeout=5000)
    assert not win.run.run_slot.stale and not _greyed(win.run.verdict)
    assert "Results are for step 5" in win.run.status.text()

    # a new pipeline after step 2: "step 5" is now another step, or none
    win.pipeline.set_planned([{"name": "FuseOps", "params": {}}])
    qtbot.waitUntil(lambda: win.state.get("planned") == [{"name": "FuseOps", "params": {}}], timeout=5000)
    note = win.run.run_note.text()
    assert "Stale" in note and "step 5" in note and "previous pipeline" in note, note
    assert win.run.run_note.isVisibleTo(win.run)
    for w in (win.run.verdict, win.run.figures, win.run.kernels):
        assert _greyed(w)
    assert win.run.memory_slot.stale and _greyed(win.run.memory_view)
    assert "step 5" in win.run.memory_note.text()
    assert win.run.intermediates.slot.stale and _greyed(win.run.intermediates.table)
    assert not win.run.intermediates.first_button.isEnabled()

    win.run.tabs.setCurrentIndex(0)
    win.run.resize(760, 560)
    qtbot.wait(50)
    win.run.grab().save(os.path.join(SHOTS, "stale_run.png"))

    # a new Build & Run is current again
    _build_run(qtbot, win)
    assert not win.run.run_slot.stale and not _greyed(win.run.verdict)
    assert not win.run.run_note.isVisibleTo(win.run)


def test_a_bisect_contradicts_an_older_pass_and_within_tolerance(qtbot, win):
    open_mlp(qtbot, win)
    _to_end(qtbot, win)
    win.pipeline.jump(3)
    qtbot.waitUntil(lambda: win.state.get("cursor") == 3, timeout=5000)
    _build_run(qtbot, win)
    _compare_intermediates(qtbot, win)
    assert win.run.verdict.text() == "PASS"
    assert "every one is within tolerance" in win.run.intermediates.status.text()

    win.pipeline.find_first_bad_pass()
    qtbot.waitUntil(lambda: win.pipeline.bisect_result is not None, timeout=5000)
    qtbot.waitUntil(lambda: win.state.get("cursor") == 2, timeout=5000)
    # step 3 comes after the bad step 2: its PASS and "within tolerance" cannot stand
    assert "contradicted" in win.run.run_note.text() and "step 2" in win.run.run_note.text()
    assert _greyed(win.run.verdict)
    assert "contradicted" in win.run.intermediates.note.text() and _greyed(win.run.intermediates.status)
    assert win.pipeline.table.item(2, 0).text() == "✗ 2"

    # the bisect's marks are for this pipeline: in another one step 2 is another step
    win.pipeline.jump(1)
    qtbot.waitUntil(lambda: win.state.get("cursor") == 1, timeout=5000)
    win.pipeline.set_planned([{"name": "FuseOps", "params": {}}])
    qtbot.waitUntil(lambda: len(win.state.get("steps") or []) == 2, timeout=5000)
    win.pipeline.step()
    qtbot.waitUntil(lambda: len(win.state.get("steps") or []) == 3, timeout=5000)
    assert win.pipeline.table.item(1, 0).text() == "✓ 1"   # the same step as the bisect checked
    assert win.pipeline.table.item(2, 0).text() == "2"


def test_write_repro_after_a_bisect_writes_the_bad_step_not_the_highlighted_row(qtbot, win, tmp_path):
    open_mlp(qtbot, win)
    win.pipeline.find_first_bad_pass()
    qtbot.waitUntil(lambda: win.state.get("cursor") == 2 and bool(win.pipeline.bisect_result), timeout=5000)
    win.pipeline.table.selectRow(0)  # a row clicked to look at: not what the repro is for
    win.pipeline.jump(4)
    qtbot.waitUntil(lambda: win.state.get("cursor") == 4, timeout=5000)
    win.pipeline.write_repro(str(tmp_path))
    assert win.bridge.sent[-1] == ("write_repro", {"out_dir": str(tmp_path), "step": 2})
    assert "step 2" in win.pipeline.info.text()

    # no bisect that still holds (step 2 is another pass now): the cursor's step
    win.pipeline.jump(1)
    qtbot.waitUntil(lambda: win.state.get("cursor") == 1, timeout=5000)
    win.pipeline.set_planned([{"name": "FuseOps", "params": {}}, {"name": "FuseTIR", "params": {}}])
    qtbot.waitUntil(lambda: len(win.state.get("planned") or []) == 2, timeout=5000)
    win.pipeline.run_to_end()
    qtbot.waitUntil(lambda: win.state.get("cursor") == 3, timeout=5000)
    win.pipeline.table.selectRow(0)
    win.pipeline.write_repro(str(tmp_path))
    assert win.bridge.sent[-1] == ("write_repro", {"out_dir": str(tmp_path), "step": 3})


def test_memory_failure_on_an_ir_file_says_why_with_the_hint(qtbot, win):
    open_mlp(qtbot, win)
    _plan_memory(qtbot, win)
    error = {"stage": "build", "message": "Cannot show the memory plan of main: its sizes are "
             "symbolic (n * 4), so StaticPlanBlockMemory leaves them to run time.",
             "hint": "Plan a function whose inputs have fixed shapes.", "detail": "Traceback …"}
    win.bridge.fail_next = {"cmd": "memory", "error": error}
    win.run.plan_memory()
    qtbot.waitUntil(lambda: win.run.memory_view.plan is None, timeout=5000)
    text = win.run.memory_status.text()
    assert text.startswith("Memory planning failed: Cannot show the memory plan of main")
    assert "hint: Plan a function whose inputs have fixed shapes." in text
    assert win.state.get("model") == "mlp"  # nothing else changed
    win.run.tabs.setCurrentIndex(3)
    win.run.resize(760, 420)
    qtbot.wait(50)
    win.run.grab().save(os.path.join(SHOTS, "stale_memory_error.png"))


def test_a_long_verdict_or_status_never_widens_the_window(qtbot, win):
    open_mlp(qtbot, win)
    screen = QApplication.primaryScreen().availableGeometry().width()
    win.resize(min(1200, screen), 800)
    qtbot.wait(50)
    width, least = win.width(), win.minimumSizeHint().width()
    long = "x" * 2000
    win.run.verdict.setText(long)
    win.run.status.setText(long)
    win.run.memory_status.setText("Memory planning failed: " + long)
    win.run.intermediates.status.setText(long)
    win.pipeline.show_bisect({"first_bad": {"index": 0, "pass": "import", "stage": "build",
                                            "reason": long}, "steps_checked": []})
    # the verdict of a finished run sets its own minimum width
    win.run.on_error("run", {"stage": long, "message": long})
    QApplication.processEvents()
    qtbot.wait(50)
    assert win.width() == width
    assert win.minimumSizeHint().width() <= max(least, 0) and least <= 1600
    assert win.run.verdict.minimumWidth() < 400


def test_latency_trace_and_comparison_go_stale_with_the_pipeline(qtbot, win):
    from fake_bridge import FakeBridge

    from irviz.ui.events import EventHub
    from irviz.ui.panes.compare_window import ComparePane

    open_mlp(qtbot, win)
    _to_end(qtbot, win)
    win.run.latency_trace()
    qtbot.waitUntil(lambda: win.run.latency is not None, timeout=5000)
    qtbot.waitUntil(lambda: win.pipeline.table.item(2, 7).text() != "", timeout=5000)
    assert not win.run.latency_slot.stale
    win.pipeline.jump(1)
    qtbot.waitUntil(lambda: win.state.get("cursor") == 1, timeout=5000)
    win.pipeline.set_planned([{"name": "FuseOps", "params": {}}])
    qtbot.waitUntil(lambda: win.state.get("planned") == [{"name": "FuseOps", "params": {}}], timeout=5000)
    assert win.run.latency_slot.stale and _greyed(win.run.chart)
    assert "previous pipeline" in win.run.latency_note.text()
    # the per-step columns keep only the steps that are still the same
    assert win.pipeline.table.item(1, 7).text() != ""

    bridge = FakeBridge()
    pane = ComparePane(bridge, EventHub())
    qtbot.addWidget(pane)
    state = dict(win.state)
    bridge.stateChanged.emit(state)
    pane.compare("LegalizeOps,FuseOps")
    qtbot.waitUntil(lambda: pane.result is not None, timeout=5000)
    assert not pane.slot.stale
    bridge.stateChanged.emit(dict(state, planned=[{"name": "FuseTIR", "params": {}}],
                                  pipeline_text="LegalizeOps,FuseTIR"))
    assert pane.slot.stale and _greyed(pane.rows) and "previous pipeline" in pane.note.text()
