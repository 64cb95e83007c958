"""Pane tests against the shared fake bridge (tests/ui/fake_bridge.py: fast, no engine).
End-to-end tests with the real engine are in test_main_window.py."""
from __future__ import annotations

import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

from fake_bridge import TEXT0, FakeBridge, diff_rows, open_mlp, step

def test_open_fills_every_pane(qtbot, win):
    open_mlp(qtbot, win)
    assert win.fx.table.rowCount() == 4
    assert win.fx.table.item(1, 2).text() == "aten.linear.default"
    assert win.fx.table.item(1, 4).text() == "1×32"
    assert win.fx.table.item(1, 5).text() == "fc1 (Linear)"
    assert "R.matmul" in win.relax.code.toPlainText()
    assert win.pipeline.table.rowCount() == 1
    assert win.pipeline.planned_list.count() == 5
    assert win.pipeline.pipeline_box.currentText() == "zero"
    assert "mlp" in win.windowTitle()
    assert win.recent_files()[0] == "sample:mlp"
    assert [a.text() for a in win.samples_menu.actions()] == ["mlp", "resnet18"]


def test_step_updates_relax_tir_diff(qtbot, win):
    open_mlp(qtbot, win)
    step(qtbot, win)
    assert "call_tir" in win.relax.code.toPlainText()
    assert win.tir.tree.topLevelItemCount() == 3
    assert "T.prim_func" in win.tir.code.toPlainText()
    # LegalizeOps turned the ops into call_tir: the Relax graph marks them changed
    assert set(win.relax.changed) == {"lv", "lv1", "lv2"}
    assert win.diff.pair == (0, 1)
    assert win.diff.view.function_box.count() == 3
    assert win.diff.view.hunk_count() >= 2
    assert win.pipeline.table.rowCount() == 2
    step(qtbot, win)  # AnnotateTIROpPattern changes nothing
    win.pipeline.hide_unchanged.setChecked(True)
    assert win.pipeline.visible_steps() == [0, 1]
    win.back()
    qtbot.waitUntil(lambda: win.state["cursor"] == 1, timeout=5000)


def test_cross_linking_fx_to_relax_and_tir(qtbot, win):
    open_mlp(qtbot, win)
    step(qtbot, win)
    qtbot.waitUntil(lambda: bool(win.hub.provenance.relax_to_callee), timeout=5000)
    win.hub.select_fx("linear")
    assert win.relax.linked_ids() == ["lv", "lv1"]
    assert win.tir.linked_ids() == ["matmul", "add"]
    assert win.relax.code.highlighted_lines()  # the bindings' lines are marked
    qtbot.waitUntil(lambda: win.tir.selected == "matmul", timeout=5000)
    # reverse: a TensorIR function back to FX
    win.hub.select_tir("relu")
    assert win.fx.linked_ids() == ["relu"]
    assert win.relax.linked_ids() == ["lv2"]
    # a click in the FX table goes through the hub too
    win.fx.table.selectRow(1)
    assert win.hub.selection.key == "linear"


def test_build_run_fills_table_and_heat(qtbot, win):
    open_mlp(qtbot, win)
    heat = []
    win.hub.heatChanged.connect(heat.append)
    win.act_build_run.trigger()
    qtbot.waitUntil(lambda: win.run.result is not None, timeout=5000)
    assert win.run.verdict.text() == "PASS"
    assert win.run.kernels.rowCount() == 3
    assert win.run.kernels.item(0, 0).text() == "matmul"  # sorted by time
    assert heat[-1] == {"lv": 0.3, "lv1": 0.05, "lv2": 0.05}


def test_failure_keeps_state_and_notifies(qtbot, win):
    open_mlp(qtbot, win)
    win.bridge.fail_next = {"cmd": "step", "error": {"stage": "pipeline", "message": "FuseOps exploded",
                                                      "hint": "try another pass"}}
    win.step()
    qtbot.waitUntil(lambda: win.last_error is not None, timeout=5000)
    assert "FuseOps exploded" in win.status_label.text()
    assert "try another pass" in win.status_label.text()
    assert win.toast.isVisible()
    assert win.state["cursor"] == 0
    assert win.all_filled()


def test_failed_open_restores_the_panes(qtbot, win):
    open_mlp(qtbot, win)
    win.open_spec("/missing/model.py")
    qtbot.waitUntil(lambda: win.last_error is not None, timeout=5000)
    qtbot.waitUntil(win.all_filled, timeout=5000)
    assert "Opening" not in win.fx.info.text() and "Opening" not in win.relax.info.text()


def test_build_error_shown_in_run_pane(qtbot, win):
    open_mlp(qtbot, win)
    win.bridge.fail_next = {"cmd": "build_run", "error": {"stage": "build", "message": "no llvm", "hint": "h"}}
    win.build_run()
    qtbot.waitUntil(lambda: win.run.error is not None, timeout=5000)
    assert "BUILD FAILED" in win.run.verdict.text()
    assert "no llvm" in win.run.status.text()


def test_compose_pipeline(qtbot, win):
    open_mlp(qtbot, win)
    pp = win.pipeline
    qtbot.waitUntil(lambda: bool(pp.passes), timeout=5000)
    pp.planned_list.setCurrentRow(0)
    pp.remove_selected()
    qtbot.waitUntil(lambda: pp.planned_list.count() == 4, timeout=5000)
    assert pp.pipeline_box.currentText() == "(custom)"
    pp.planned_list.setCurrentRow(0)
    pp.move_selected(1)
    qtbot.waitUntil(lambda: pp.planned[1]["name"] == "AnnotateTIROpPattern", timeout=5000)
    pp.add_pass("FuseOpsByPattern")
    qtbot.waitUntil(lambda: any(p["name"] == "FuseOpsByPattern" for p in pp.planned), timeout=5000)
    row = next(i for i, p in enumerate(pp.planned) if p["name"] == "FuseOpsByPattern")
    pp.planned_list.setCurrentRow(row)
    assert pp.params_box.isVisible()
    assert pp.params_form.rowCount() == 2
    pp._set_param(row, "bind_constants", False)
    qtbot.waitUntil(lambda: pp.planned[row]["params"]["bind_constants"] is False, timeout=5000)


def test_jump_by_double_click_and_diff_of_any_step(qtbot, win):
    open_mlp(qtbot, win)
    win.run_to_end()
    qtbot.waitUntil(lambda: win.state["cursor"] == 5 and win.all_filled(), timeout=5000)
    win.pipeline.table.cellDoubleClicked.emit(1, 0)
    qtbot.waitUntil(lambda: win.state["cursor"] == 1, timeout=5000)
    win.hub.select_step(1)
    qtbot.waitUntil(lambda: win.diff.result is not None and win.diff.pair == (0, 1), timeout=5000)
    win.diff.view.set_mode("unified")
    assert "+" in win.diff.view.unified.toPlainText()
    win.diff.view.set_function("main")
    win.diff.view.set_mode("side")
    assert win.diff.view.hunk_count() == 2  # the function header + one changed block


def test_a_click_on_a_step_says_the_diff_left_the_cursor(qtbot, win):
    open_mlp(qtbot, win)
    win.run_to_end()
    qtbot.waitUntil(lambda: win.state["cursor"] == 5 and win.all_filled(), timeout=5000)
    win.pipeline.table.selectRow(2)  # a single click: the diff of step 2, the cursor stays
    qtbot.waitUntil(lambda: win.diff.result is not None and win.diff.pair == (1, 2), timeout=5000)
    assert win.state["cursor"] == 5
    assert not win.diff.follow.isChecked()
    assert "not the cursor's step 5" in win.diff.info.text() and "Follow cursor" in win.diff.info.text()
    win.diff.follow.setChecked(True)
    qtbot.waitUntil(lambda: win.diff.pair == (4, 5) and win.diff.result is not None, timeout=5000)
    assert "not the cursor" not in win.diff.info.text()


def test_export(qtbot, win, tmp_path):
    open_mlp(qtbot, win)
    win.export_to(str(tmp_path), current_only=False)
    qtbot.waitUntil(lambda: any("Exported" in m for m in win.messages), timeout=5000)
    assert ("export", {"out_dir": str(tmp_path), "steps": "all"}) in win.bridge.sent


def test_engine_restart_is_shown(qtbot, win):
    win.bridge.engineRestarted.emit("TVM crashed while running FuseTIR. Restarted and replayed to step 3.")
    assert "FuseTIR" in win.status_label.text()
    assert win.toast.isVisible()


def test_theme_and_layout_remembered(qtbot, settings):
    from irviz.ui.main_window import MainWindow

    w = MainWindow(bridge=FakeBridge(), settings=settings)
    qtbot.addWidget(w)
    w.show()
    w.set_theme("dark")
    w.docks["run"].hide()
    w.relax.set_view("code")
    w.close()
    w2 = MainWindow(bridge=FakeBridge(), settings=settings)
    qtbot.addWidget(w2)
    w2.show()
    from irviz.ui import themes
    assert themes.colors().name == "dark"
    assert not w2.docks["run"].isVisible()
    assert w2.relax.view_mode() == "code" and not w2.relax.graph.isVisible()
    w2.set_theme("light")
    w2.close()


def test_code_view_find_and_highlight(qtbot):
    from irviz.ui.widgets.code_view import CodeView

    v = CodeView()
    qtbot.addWidget(v)
    v.set_text(TEXT0)
    assert v.find_text("lv1")
    assert v.match_count() == 2
    assert v.highlight_words(["lv1"]) == [5, 6]


def test_diff_view_hunks(qtbot):
    from irviz.ui.widgets.diff_view import DiffView

    v = DiffView()
    qtbot.addWidget(v)
    v.set_diff({"unified": "", "functions": [{"name": "main", "status": "changed", "rows": diff_rows()}]})
    assert v.hunk_count() == 2  # header + one block of 3 changed rows
    v.next_hunk()
    assert v.current_hunk() == 1
    v.prev_hunk()
    assert v.current_hunk() == 0
    assert v.left.toPlainText().count("\n") == v.right.toPlainText().count("\n")


def test_kernel_heat_shares_time_between_call_sites():
    from irviz.ui.panes.build_run import kernel_heat

    heat = kernel_heat([{"name": "conv2d1", "calls": 2, "ms": 4.0, "binding": "lv8, lv12"},
                        {"name": "relu", "calls": 1, "ms": 1.0, "binding": "lv9"},
                        {"name": "extern", "calls": 1, "ms": 1.0, "binding": None}])
    assert heat == {"lv8": 2.0, "lv12": 2.0, "lv9": 1.0}


def test_events_provenance_maps():
    from irviz.ui.events import Provenance

    p = Provenance({"fx_to_relax": {"a": ["v1", "v2"], "b": ["v2"]}, "relax_to_callee": {"v2": "fused"}})
    assert p.from_fx("a").tir == ["fused"]
    assert p.from_tir("fused").fx == ["a", "b"]
    assert p.from_relax("v1").tir == []


def test_ui_does_not_import_torch_or_tvm():
    import subprocess

    code = ("import sys; import irviz.ui.main_window, irviz.ui.app, irviz.cli.snapshot; "
            "bad = [m for m in ('torch', 'tvm', 'tvm_ffi') if m in sys.modules]; print(bad); "
            "sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert r.returncode == 0, r.stdout + r.stderr


def test_reopening_the_same_model_reloads_the_panes(qtbot, win):
    open_mlp(qtbot, win)
    n = sum(1 for cmd, _ in win.bridge.sent if cmd == "fx_graph")
    open_mlp(qtbot, win)
    qtbot.waitUntil(lambda: sum(1 for cmd, _ in win.bridge.sent if cmd == "fx_graph") == n + 1, timeout=5000)
    qtbot.waitUntil(win.all_filled, timeout=5000)


def test_drop_a_file_opens_it(qtbot, win, tmp_path):
    from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
    from PySide6.QtGui import QDropEvent

    path = tmp_path / "model.py"
    path.write_text("def get_model(): ...\n")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    ev = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                    Qt.KeyboardModifier.NoModifier)
    win.dropEvent(ev)
    assert ("open", {"spec": str(path), "pipeline": "zero"}) in win.bridge.sent


def test_help_dialog_lists_shortcuts(qtbot, win):
    from irviz.ui.help import SHORTCUTS, HelpDialog

    d = HelpDialog(win)
    qtbot.addWidget(d)
    from PySide6.QtWidgets import QTextBrowser

    body = d.findChild(QTextBrowser).toPlainText()
    for key, _ in SHORTCUTS:
        assert key in body
    shortcuts = {a.shortcut().toString() for a in win.actions() if not a.shortcut().isEmpty()}
    assert {"F10", "Shift+F10", "F5", "Ctrl+R", "Ctrl+O", "F1"} <= shortcuts


def test_step_shortcuts_drive_the_engine(qtbot, win):
    from PySide6.QtCore import Qt

    open_mlp(qtbot, win)
    qtbot.keyClick(win, Qt.Key.Key_F10)
    qtbot.waitUntil(lambda: win.state["cursor"] == 1, timeout=5000)
    qtbot.keyClick(win, Qt.Key.Key_F10, Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: win.state["cursor"] == 0, timeout=5000)
    qtbot.keyClick(win, Qt.Key.Key_F5)
    qtbot.waitUntil(lambda: win.state["cursor"] == 5, timeout=5000)


def test_busy_shows_progress_and_cancel(qtbot, win):
    win.bridge.busyChanged.emit(True)
    win.bridge.progress.emit(1, "Applying FuseOps", 0.4)
    assert win.cancel_button.isVisible() and win.progress.isVisible()
    assert win.progress.value() == 400
    assert "FuseOps" in win.status_label.text()
    win.bridge.busyChanged.emit(False)
    assert not win.cancel_button.isVisible()


def test_loop_summary_per_nest():
    from irviz.ui.panes.tir import loop_summary

    nest = [{"depth": 0, "extent": "1"}, {"depth": 1, "extent": "3"}, {"depth": 0, "extent": "8"},
            {"depth": 1, "extent": "4", "kind": "parallel"}]
    assert loop_summary({"loop_nest": nest}) == "1×3; 8×4 parallel"
    assert loop_summary({"loops": []}) == "no loops"


def test_cancelled_view_request_is_fetched_again_after_replay(qtbot, win):
    open_mlp(qtbot, win)
    step(qtbot, win)
    win.jump(0)
    qtbot.waitUntil(lambda: win.state["cursor"] == 0 and win.all_filled(), timeout=5000)
    win.bridge.fail_next = {"cmd": "tir_functions",
                            "error": {"stage": "cancelled", "message": "Cancelled applying FuseOps."}}
    win.jump(1)  # the TensorIR request of this state is cancelled
    qtbot.waitUntil(lambda: win.bridge.fail_next is None and win.tir.functions == [], timeout=5000)
    assert win.tir.tree.topLevelItemCount() == 0
    n = sum(1 for cmd, _ in win.bridge.sent if cmd == "tir_functions")
    win.bridge.stateChanged.emit(win.bridge.state())  # the bridge re-emits the replayed state
    qtbot.waitUntil(lambda: win.tir.tree.topLevelItemCount() == 3, timeout=5000)
    assert sum(1 for cmd, _ in win.bridge.sent if cmd == "tir_functions") == n + 1


def test_pipeline_shows_ir_size_and_each_steps_latency_and_error_after_a_trace(qtbot, win):
    from irviz.ui.panes.pipeline import COL_ERR, COL_RUN

    open_mlp(qtbot, win)
    win.run_to_end()
    qtbot.waitUntil(lambda: win.state["cursor"] == 5 and win.all_filled(), timeout=5000)
    t = win.pipeline.table
    headers = [t.horizontalHeaderItem(c).text() for c in range(t.columnCount())]
    assert headers[4:] == ["Bind", "PF", "TIR ln", "Run ms", "Max err", "Vec", "FMA"]
    assert [t.item(r, 6).text() for r in range(6)] == ["0", "40", "41", "42", "43", "44"]
    assert t.item(1, 5).text() == "3" and t.item(0, 4).text() == "3"
    assert t.item(2, COL_RUN).text() == ""  # no trace yet

    win.run.latency_trace()
    qtbot.waitUntil(lambda: bool(win.pipeline.trace), timeout=5000)
    assert t.item(1, COL_RUN).text() == "2.00" and t.item(1, COL_ERR).text() == "1.0e-07"
    assert t.item(2, COL_ERR).text() == "2.5e-01"
    assert t.item(2, COL_ERR).toolTip() == "outputs differ from PyTorch"
    assert t.item(3, COL_RUN).text() == "✗" and "no kernel" in t.item(3, COL_RUN).toolTip()
    shots = os.environ.get("IRVIZ_SHOTS")
    if shots:
        win.pipeline.grab().save(os.path.join(shots, "pipeline_step_numbers_fake.png"))

    # a step replaced by another pass no longer shows the old step's numbers
    win.pipeline.jump(1)
    qtbot.waitUntil(lambda: win.state["cursor"] == 1, timeout=5000)
    win.pipeline.set_planned([{"name": "FuseOps", "params": {}}])
    win.pipeline.step()
    qtbot.waitUntil(lambda: win.state["cursor"] == 2 and len(win.state["steps"]) == 3, timeout=5000)
    assert t.item(2, 1).text() == "FuseOps" and t.item(2, COL_ERR).text() == ""
    assert t.item(1, COL_ERR).text() == "1.0e-07"


def test_pipeline_pass_time_column_stays_in_view_in_the_default_window(qtbot, win):
    open_mlp(qtbot, win)
    win.run_to_end()
    qtbot.waitUntil(lambda: win.state["cursor"] == 5 and win.all_filled(), timeout=5000)
    win.show()
    qtbot.waitUntil(lambda: win.pipeline.table.isVisible(), timeout=5000)
    t = win.pipeline.table
    assert t.horizontalHeaderItem(2).text() == "ms"
    assert t.columnViewportPosition(2) + t.columnWidth(2) <= t.viewport().width(), \
        "the pass-time column is scrolled out of the pipeline dock"
    longest = max(range(t.rowCount()), key=lambda r: len(t.item(r, 1).text()))
    assert t.item(longest, 1).toolTip().startswith(t.item(longest, 1).text())


def test_diff_marks_the_bindings_a_bisect_found_diverging_at_that_step(qtbot, win):
    open_mlp(qtbot, win)
    win.run_to_end()
    qtbot.waitUntil(lambda: win.state["cursor"] == 5 and win.all_filled(), timeout=5000)
    marks = {"step": 1, "pass": "LegalizeOps", "first": "lv1", "first_fx": "linear", "compared": 2,
             "bindings": {"lv1": {"fx_node": "linear", "max_abs": 2.0, "reason": ""},
                          "lv2": {"fx_node": "relu", "max_abs": 1.5, "reason": ""}}}
    win.hub.mark_diverging(marks)
    win.hub.select_step(1)
    qtbot.waitUntil(lambda: win.diff.result is not None and win.diff.pair == (0, 1), timeout=5000)
    view = win.diff.view
    right = view.right.toPlainText().split("\n")
    assert [right[b].split("=")[0].strip() for b in view.marked_blocks] == ["lv1", "lv2"]
    assert view.right._line_labels[view.marked_blocks[0]].startswith("✗▶")
    assert "2 bindings of main whose values diverge" in win.diff.info.text()
    qtbot.waitUntil(lambda: not view.right.colouring(), timeout=5000)
    shots = os.environ.get("IRVIZ_SHOTS")
    if shots:
        win.diff.grab().save(os.path.join(shots, "diff_marked_fake.png"))
    view.set_function("main")
    view.set_mode("unified")
    unified = view.unified.toPlainText().split("\n")
    assert {unified[b][1:].split("=")[0].strip() for b in view.marked_blocks} == {"lv1", "lv2"}
    view.set_mode("side")
    view.set_function(None)

    # another step's diff: nothing marked; a new bisect clears the marks
    win.hub.select_step(2)
    qtbot.waitUntil(lambda: win.diff.pair == (1, 2) and win.diff.result is not None, timeout=5000)
    assert view.marked_blocks == [] and "diverge" not in win.diff.info.text()
    win.hub.mark_diverging({})
    win.hub.select_step(1)
    qtbot.waitUntil(lambda: win.diff.pair == (0, 1) and win.diff.result is not None, timeout=5000)
    assert view.marked_blocks == []


def test_the_step_table_says_its_units_where_the_column_is_narrow(win):
    header = win.pipeline.table.horizontalHeaderItem
    units = {header(c).text(): header(c).toolTip() for c in range(win.pipeline.table.columnCount())}
    # the pass time is the third column: its header is the unit itself, so a narrow pane shows it
    assert header(2).text() == "ms" and "milliseconds" in units["ms"]
    assert "Run ms" in units and "Max err" in units


def test_the_status_line_says_when_a_step_changed_only_attributes(win):
    from irviz.protocol.commands import make_state, step_entry

    steps = [step_entry(0, "import", {}, 0.1, True),
             step_entry(1, "AnnotateTIROpPattern", {}, 0.01, True, changed_what="attrs")]
    win.state = make_state(model="mlp", spec="sample:mlp", importer="exported_program", cursor=1, steps=steps)
    assert win._step_text() == "Step 1: AnnotateTIROpPattern — changed only attributes"
