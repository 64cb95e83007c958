"""Nothing made for another model, step, pipeline or target passes for current: the Code tab, the
graphs' heat legends, the kernel table (no ghost rows), the Run pane's "Results are for step N"
line and the toasts are cleared or marked on every change; the toast's × closes it; the Code tab
compiles for the session's target unless another is picked there, from the engine's targets.
On the fake engine (tests/ui/fake_bridge.py)."""
from __future__ import annotations

import os

import pytest
from fake_bridge import FAKE_TARGETS, FakeBridge, open_mlp, step
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from irviz.ui.result_stamp import is_faded

SHOTS = os.environ.get("IRVIZ_SHOTS", "/tmp")


class HeldCode(FakeBridge):
    """Keeps kernel_code replies until `release`, to look at the tab while code is on its way;
    Build & Run times `n_kernels` kernels."""

    def __init__(self, n_kernels: int = 3):
        super().__init__()
        self.hold = False
        self.held: list = []
        self.n_kernels = n_kernels

    def _answer(self, rid, cmd, args):
        if self.hold and cmd == "kernel_code":
            self.held.append((rid, cmd, args))
            return
        super()._answer(rid, cmd, args)

    def release(self):
        held, self.held = self.held, []
        for rid, cmd, args in held:
            super()._answer(rid, cmd, args)

    def _compute(self, cmd, a):
        result = super()._compute(cmd, a)
        if cmd == "build_run" and isinstance(result, dict) and self.n_kernels != 3:
            result["kernels"] = [{"name": f"fused_{i}", "calls": 1, "ms": 0.01 * (i + 1), "binding": "lv"}
                                 for i in range(self.n_kernels)]
        return result


def _window(qtbot, settings, bridge):
    from irviz.ui.main_window import MainWindow

    w = MainWindow(bridge=bridge, settings=settings)
    qtbot.addWidget(w)
    w.resize(1600, 1000)
    w.show()
    return w


@pytest.fixture
def held(qtbot, settings):
    w = _window(qtbot, settings, HeldCode())
    yield w
    w.close()


def _jump(qtbot, win, index):
    win.pipeline.jump(index)
    qtbot.waitUntil(lambda: win.state.get("cursor") == index, timeout=5000)


def _code_tab(qtbot, win, kernel="matmul"):
    tab = win.tir.kernel_code
    win.tir.tabs.setCurrentWidget(tab)
    win.hub.select_tir(kernel)
    qtbot.waitUntil(lambda: f"{kernel}_compute_" in tab.code.toPlainText(), timeout=5000)
    return tab


def _code_asks(win) -> list[dict]:
    return [a for cmd, a in win.bridge.sent if cmd == "kernel_code"]


def _build_run(qtbot, win):
    win.run.result = None
    win.act_build_run.trigger()
    qtbot.waitUntil(lambda: win.run.result is not None, timeout=5000)


def test_another_model_never_shows_the_previous_models_code(qtbot, win):
    open_mlp(qtbot, win)
    step(qtbot, win)
    tab = _code_tab(qtbot, win)
    assert tab.code.toPlainText()

    win.open_spec("sample:resnet18")
    qtbot.waitUntil(lambda: win.state.get("model") == "resnet18", timeout=5000)
    qtbot.waitUntil(lambda: win.all_filled(), timeout=5000)
    assert tab.code.toPlainText() == ""  # step 0 of the new model has no kernels
    assert "No kernels at step 0" in tab.counts.text()

    # the same step index and kernel name in the new model are compiled anew, not kept
    asked = len(_code_asks(win))
    step(qtbot, win)
    qtbot.waitUntil(lambda: len(_code_asks(win)) > asked and tab.result is not None, timeout=5000)
    assert not tab.slot.stale and "matmul_compute_" in tab.code.toPlainText()


def test_code_for_another_step_is_greyed_until_the_new_code_comes(qtbot, held):
    win = held
    open_mlp(qtbot, win)
    step(qtbot, win, 2)
    tab = _code_tab(qtbot, win)
    assert not is_faded(tab.code) and not tab.stale_note.isVisibleTo(tab)

    win.bridge.hold = True
    _jump(qtbot, win, 1)
    qtbot.waitUntil(lambda: bool(win.bridge.held), timeout=5000)
    assert win.bridge.held[-1][2]["step"] == 1
    assert is_faded(tab.code) and tab.stale_note.isVisibleTo(tab)
    assert "for step 2; the cursor is at step 1" in tab.stale_note.text()
    tab.resize(640, 300)
    tab.grab().save(os.path.join(SHOTS, "stale_code_tab.png"))

    win.bridge.hold = False
    win.bridge.release()
    qtbot.waitUntil(lambda: not tab.slot.stale, timeout=5000)
    assert not is_faded(tab.code) and "(step 1, host" in tab.counts.text()


def test_the_code_tab_compiles_for_the_sessions_target_unless_picked_there(qtbot, win):
    open_mlp(qtbot, win)
    step(qtbot, win)
    tab = _code_tab(qtbot, win)
    assert _code_asks(win)[-1]["target"] == "host"

    win.pipeline.choose_target("x86-avx2")
    qtbot.waitUntil(lambda: win.state.get("target") == "x86-avx2", timeout=5000)
    qtbot.waitUntil(lambda: _code_asks(win)[-1]["target"] == "x86-avx2" and tab.result is not None
                    and not tab.slot.stale, timeout=5000)
    assert tab.target.currentText() == "x86-avx2" and not tab.target_note.isVisibleTo(tab)
    assert "%ymm" in tab.code.toPlainText()  # the AVX2 proxy's code, not the host's zmm

    tab.pick("cuda")
    qtbot.waitUntil(lambda: _code_asks(win)[-1]["target"] == "cuda", timeout=5000)
    assert tab.target_note.isVisibleTo(tab)
    assert tab.target_note.text() == "Target: cuda (picked here; the session's target is x86-avx2)"
    tab.resize(640, 300)
    tab.grab().save(os.path.join(SHOTS, "code_tab_picked_target.png"))

    # the pick holds across a change of the session's target, and the note follows it
    win.pipeline.choose_target("aarch64")
    qtbot.waitUntil(lambda: win.state.get("target") == "aarch64", timeout=5000)
    qtbot.waitUntil(lambda: tab.result is not None and not tab.slot.stale, timeout=5000)
    assert _code_asks(win)[-1]["target"] == "cuda"
    assert tab.target_note.text() == "Target: cuda (picked here; the session's target is aarch64)"

    tab.follow_button.click()
    qtbot.waitUntil(lambda: _code_asks(win)[-1]["target"] == "aarch64", timeout=5000)
    assert not tab.target_note.isVisibleTo(tab) and tab.target.currentText() == "aarch64"


def test_the_code_tabs_targets_are_the_engines(qtbot, win):
    qtbot.waitUntil(lambda: win.tir.kernel_code.target.count() > 1, timeout=5000)
    box = win.tir.kernel_code.target
    names = [box.itemText(i) for i in range(box.count())]
    assert names == [t["name"] for t in FAKE_TARGETS if not t["unavailable"]]


def test_another_target_at_the_same_step_asks_the_panes_again(qtbot, win):
    open_mlp(qtbot, win)
    step(qtbot, win)
    before = len(win.bridge.sent)
    win.pipeline.choose_target("aarch64")
    qtbot.waitUntil(lambda: win.state.get("target") == "aarch64", timeout=5000)
    qtbot.waitUntil(lambda: win.all_filled(), timeout=5000)
    asked = {cmd for cmd, _a in win.bridge.sent[before:]}
    assert {"tir_functions", "relax_graph", "diff"} <= asked, asked


def test_kernel_time_legend_goes_with_its_model_and_step(qtbot, win):
    open_mlp(qtbot, win)
    step(qtbot, win, 2)
    _build_run(qtbot, win)
    legend = win.relax.graph.heat.legend
    qtbot.waitUntil(lambda: legend.isVisibleTo(win.relax.graph), timeout=5000)
    assert legend.text().startswith("Kernel time")

    _jump(qtbot, win, 1)   # step 1's bindings may call other kernels
    qtbot.waitUntil(lambda: win.all_filled(), timeout=5000)
    assert not legend.isVisibleTo(win.relax.graph)
    assert not any(it.heat for it in win.relax.graph.nodes.values())
    win.relax.grab().save(os.path.join(SHOTS, "relax_heat_other_step.png"))
    _jump(qtbot, win, 2)
    qtbot.waitUntil(lambda: legend.isVisibleTo(win.relax.graph), timeout=5000)
    win.relax.grab().save(os.path.join(SHOTS, "relax_heat_its_step.png"))

    win.open_spec("sample:resnet18")
    qtbot.waitUntil(lambda: win.state.get("model") == "resnet18", timeout=5000)
    qtbot.waitUntil(lambda: win.all_filled(), timeout=5000)
    assert not legend.isVisibleTo(win.relax.graph) and legend.text() == ""
    win.relax.grab().save(os.path.join(SHOTS, "relax_heat_next_model.png"))


def test_results_are_for_line_follows_every_cursor_move(qtbot, win):
    open_mlp(qtbot, win)
    step(qtbot, win, 3)
    _build_run(qtbot, win)
    result_text = win.run.status.text()
    assert result_text.startswith("Step 3: outputs match")
    for where in (2, 0, 5):
        _jump(qtbot, win, where)
        assert win.run.status.text().startswith(f"Results are for step 3; the cursor is at step {where}."), where
    _jump(qtbot, win, 3)
    assert win.run.status.text() == result_text

    # stale (another pipeline after step 1): the line still says where the cursor is
    _jump(qtbot, win, 1)
    win.pipeline.set_planned([{"name": "FuseOps", "params": {}}])
    qtbot.waitUntil(lambda: win.run.run_slot.stale, timeout=5000)
    _jump(qtbot, win, 0)
    assert win.run.status.text().startswith("Results are for step 3; the cursor is at step 0.")
    win.run.resize(760, 420)
    win.run.grab().save(os.path.join(SHOTS, "stale_run_stamp.png"))


def _backing_store(win, widget):
    """What is on screen where `widget` is, as the window's backing store holds it."""
    shot = QApplication.primaryScreen().grabWindow(win.winId()).toImage()
    top_left = widget.mapTo(win, QPoint(0, 0))
    return shot.copy(top_left.x(), top_left.y(), widget.width(), widget.height())


def test_a_stale_kernel_table_draws_no_ghost_rows(qtbot, settings):
    win = _window(qtbot, settings, HeldCode(n_kernels=40))
    open_mlp(qtbot, win)
    step(qtbot, win, 3)
    _build_run(qtbot, win)
    table = win.run.kernels
    win.run.tabs.setCurrentWidget(table)
    qtbot.waitUntil(lambda: table.rowCount() == 40, timeout=5000)
    _jump(qtbot, win, 1)
    win.pipeline.set_planned([{"name": "FuseOps", "params": {}}])
    qtbot.waitUntil(lambda: win.run.run_slot.stale, timeout=5000)
    qtbot.wait(50)

    table.verticalScrollBar().setValue(table.verticalScrollBar().maximum() // 2)
    qtbot.wait(50)
    scrolled = _backing_store(win, table.viewport())
    scrolled.save(os.path.join(SHOTS, "stale_kernel_table_scrolled.png"))
    table.viewport().repaint()   # drawn afresh: what the table holds, no rows left behind
    qtbot.wait(50)
    assert scrolled == _backing_store(win, table.viewport())
    assert is_faded(table) and not table.isEnabled()
    win.close()


def test_the_toast_close_button_closes_even_a_long_failure(qtbot, win):
    open_mlp(qtbot, win)
    trace = "\n".join(f"  File \"pass.py\", line {i}, in visit" for i in range(120))
    win.bridge.fail_next = {"cmd": "step", "error": {"stage": "pipeline", "message": "FuseTIR failed\n" + trace,
                                                     "hint": "see the traceback"}}
    win.act_step.trigger()
    qtbot.waitUntil(lambda: win.toast.isVisible(), timeout=5000)
    assert win.toast.geometry().top() >= 0 and win.toast.geometry().bottom() <= win.height()
    button = win.toast.close_button
    at = button.mapTo(win, button.rect().center())
    assert win.childAt(at) is button
    QTest.mouseClick(win.windowHandle(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at)
    qtbot.waitUntil(lambda: not win.toast.isVisible(), timeout=2000)


def test_a_toast_is_marked_once_another_step_is_open(qtbot, win):
    open_mlp(qtbot, win)
    step(qtbot, win, 2)
    win.bridge.fail_next = {"cmd": "step", "error": {"stage": "pipeline", "message": "FoldConstant failed"}}
    win.act_step.trigger()
    qtbot.waitUntil(lambda: win.toast.isVisible(), timeout=5000)
    qtbot.wait(20)
    assert not win.toast.stale_note.isVisibleTo(win.toast)

    _jump(qtbot, win, 0)
    assert win.toast.isVisible() and win.toast.stale_note.isVisibleTo(win.toast)
    assert "step 2" in win.toast.stale_note.text() and "step 0" in win.toast.stale_note.text()
    assert is_faded(win.toast.scroll_area)
    win.toast.grab().save(os.path.join(SHOTS, "stale_toast.png"))
