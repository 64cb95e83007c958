"""Pipeline pane (Compiler Explorer's opt-pipeline view): the applied steps (pass, time, changed),
a filter hiding passes that changed nothing and the stepping buttons.  Its parts are objects it
owns, each given a PaneLink (read the state, ask as the pane, write the info line) and answering
with signals: the planned passes (planned_passes.py), the Target box (target_box.py), Count code
(code_totals.py), Find first bad pass and the repro folder (bisect_actions.py)."""
from __future__ import annotations

import html
from typing import Literal

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QHeaderView, QPushButton, QSplitter,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from irviz.core.views.latency_svg import fmt_ms
from irviz.protocol.commands import Invocation, State, StepEntry
from irviz.ui import themes
from irviz.ui.panes.base import Pane, dim_label, row_table
from irviz.ui.panes.bisect_actions import BisectActions
from irviz.ui.panes.code_totals import CODE_COLUMNS, CodeTotals
from irviz.ui.panes.pass_params import params_text
from irviz.ui.panes.pipeline_link import PaneLink
from irviz.ui.panes.planned_passes import PlannedPasses
from irviz.ui.panes.target_box import TargetBox
from irviz.ui.result_stamp import ResultStamp

# (header, tooltip); the last five are the per-step numbers
COLUMNS = [("#", "Step"), ("Pass", "The pass applied"), ("ms", "Time the pass took to apply, in milliseconds"),
           ("Changed", "Whether the pass changed the module (+added −removed ~changed functions)"),
           ("Bind", "Bindings in main"), ("PF", "TensorIR prim_funcs in the module"),
           ("TIR ln", "Lines of TensorIR (TVMScript) in the module"),
           ("Run ms", "TVM latency of the step built (Run ▸ Time every step)"),
           ("Max err", "Largest absolute difference from PyTorch's outputs (Run ▸ Time every step)"),
           *CODE_COLUMNS]
COL_RUN, COL_ERR, COL_VEC = 7, 8, 9
# a step's lists of function names, with the mark its column shows them by
STEP_LISTS: tuple[tuple[Literal["added", "removed", "changed_funcs"], str], ...] = (
    ("added", "+"), ("removed", "−"), ("changed_funcs", "~"))
SIZE_KEYS: tuple[Literal["bindings", "prim_funcs", "tir_lines"], ...] = ("bindings", "prim_funcs", "tir_lines")
PASS_COLUMN_MAX = 150  # px: "#", "Pass" and "ms" fit the dock's default width


def _err_text(v) -> str:
    if v is None:
        return "–"
    return "0" if v == 0 else f"{v:.1e}"


def _forward(part: str, name: str) -> property:
    """The pane's name for an attribute of one of its parts (what tests and the window use)."""
    return property(lambda self: getattr(getattr(self, part), name),
                    doc=f"``self.{part}.{name}``")


class PipelinePane(Pane):
    passFileRequested = Signal()

    def __init__(self, bridge, hub, parent=None, settings=None):
        super().__init__(bridge, hub, parent, settings=settings)
        self.steps: list[StepEntry] = []
        self.planned: list[Invocation] = []
        self._kept_message: str | None = None  # shown instead of the next state's summary
        self.info = dim_label("No model open")
        link = PaneLink(state=lambda: self.state, steps=lambda: self.steps, planned=lambda: self.planned,
                        ask=self.ask, waiting=self.waiting, request=bridge.request, info=self.info)
        self.counts = CodeTotals(link, self)
        self.counts.changed.connect(self._refill)
        self.counts.counted.connect(self._show_code_columns)
        self.target_box = TargetBox(link)
        self.target_box.listed.connect(self.counts.list_targets)
        self.target_box.shown.connect(self.counts.follow_target)
        self.planning = PlannedPasses(link, self.target_box)
        self.bisect = BisectActions(link, hub, self)
        self.bisect.changed.connect(self._refill)
        self.bisect.changed.connect(self._update_buttons)

        # -- stepping
        self.back_button = QPushButton("◀ Back")
        self.back_button.setToolTip("Step back (Shift+F10)")
        self.back_button.clicked.connect(self.back)
        self.step_button = QPushButton("Step ▶")
        self.step_button.setToolTip("Apply the next pass (F10)")
        self.step_button.clicked.connect(self.step)
        self.run_button = QPushButton("Run to end ▶▶")
        self.run_button.setToolTip("Apply every planned pass (F5)")
        self.run_button.clicked.connect(self.run_to_end)
        steps_bar = QHBoxLayout()
        steps_bar.setContentsMargins(0, 0, 0, 0)
        for b in (self.back_button, self.step_button, self.run_button):
            steps_bar.addWidget(b)

        # -- applied steps
        self.hide_unchanged = QCheckBox("Hide passes that changed nothing")
        self.hide_unchanged.toggled.connect(lambda _on: self._filter())
        self.table = row_table([h for h, _tip in COLUMNS])
        for col, (_h, tip) in enumerate(COLUMNS):
            if (head := self.table.horizontalHeaderItem(col)) is not None:
                head.setToolTip(tip)
        hh = self.table.horizontalHeader()
        # a stretched Pass column as wide as its longest name pushed "ms" and the rest out of
        # a narrow dock: it is capped and elided instead (the whole name is in its tooltip)
        for col in range(len(COLUMNS)):
            hh.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive if col == 1 else
                                    QHeaderView.ResizeMode.ResizeToContents)
        hh.setStretchLastSection(True)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        # the last latency trace ("Time every step" in the Run pane), {step index: entry}
        self.trace: dict[int, dict] = {}
        self.trace_stamp: ResultStamp | None = None
        bridge.replied.connect(self._on_any_reply)
        self.table.cellDoubleClicked.connect(lambda r, _c: self.jump(self._row_index(r)))
        self.table.itemSelectionChanged.connect(self._step_clicked)
        self.table.setToolTip("Double-click a step to jump to it")

        # -- debugging numbers: bisect, repro folder
        debug_bar = QHBoxLayout()
        debug_bar.setContentsMargins(0, 0, 0, 0)
        debug_bar.addWidget(self.bisect_button)
        debug_bar.addWidget(self.repro_button)
        debug_bar.addStretch(1)
        # a row of its own: beside the debugging buttons it widened the dock past a 1200-px window
        code_bar = QHBoxLayout()
        code_bar.setContentsMargins(0, 0, 0, 0)
        for w in self.counts.controls():
            code_bar.addWidget(w)
        code_bar.addStretch(1)
        bridge.progress.connect(self.bisect.on_progress)

        applied = QWidget()
        al = QVBoxLayout(applied)
        al.setContentsMargins(0, 0, 0, 0)
        al.setSpacing(3)
        al.addLayout(steps_bar)
        al.addWidget(self.hide_unchanged)
        al.addWidget(self.table, 1)
        al.addLayout(debug_bar)
        al.addLayout(code_bar)

        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(applied)
        split.addWidget(self.planning)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.setSpacing(3)
        lay.addWidget(self.info)
        lay.addWidget(split, 1)
        self._update_buttons()
        self.refresh_catalogues()

    # what tests, the window and the help reach through the pane
    bisect_button = _forward("bisect", "bisect_button")
    repro_button = _forward("bisect", "repro_button")
    bisect_result = _forward("bisect", "bisect_result")
    find_first_bad_pass = _forward("bisect", "find_first_bad_pass")
    show_bisect = _forward("bisect", "show_bisect")
    write_repro = _forward("bisect", "write_repro")
    choose_target = _forward("target_box", "choose_target")
    chosen_target = _forward("target_box", "chosen_target")
    code_target = _forward("counts", "code_target")
    code_button = _forward("counts", "code_button")
    count_code = _forward("counts", "count_code")
    on_code_reply = _forward("counts", "on_code_reply")
    passes = _forward("planning", "passes")
    pipelines = _forward("planning", "pipelines")
    pipeline_box = _forward("planning", "pipeline_box")
    planned_list = _forward("planning", "planned_list")
    plan_note = _forward("planning", "plan_note")
    add_menu = _forward("planning", "add_menu")
    params_box = _forward("planning", "params_box")
    params_form = _forward("planning", "params_form")
    origin = _forward("planning", "origin")
    add_pass = _forward("planning", "add_pass")
    remove_selected = _forward("planning", "remove_selected")
    move_selected = _forward("planning", "move_selected")
    set_planned = _forward("planning", "set_planned")
    use_pipeline = _forward("planning", "use_pipeline")
    copy_pipeline_text = _forward("planning", "copy_pipeline_text")
    paste_pipeline_text = _forward("planning", "paste_pipeline_text")
    load_pass_file = _forward("planning", "load_pass_file")
    _set_param = _forward("planning", "_set_param")

    # -- catalogues ------------------------------------------------------------------------------
    def refresh_catalogues(self) -> None:
        self.ask("passes", "list_passes")
        self.ask("pipelines", "list_pipelines")
        self.ask("targets", "list_targets")

    def on_reply(self, purpose: str, result) -> None:
        if purpose == "code_totals":
            self.counts.on_code_reply(result)
        elif purpose in ("passes", "load"):
            self.planning.set_passes(list(result or []))
            if purpose == "load":
                self.info.setText(self.planning.loaded_text())
                self.ask("pipelines", "list_pipelines")  # they name the built-ins it shadows anew
                if self.state and self.state.get("model") and any(p.get("shadows") for p in self.passes):
                    # steps of a built-in the file took the name of are now builtin:NAME
                    self._kept_message = self.info.text()
                    self.bridge.request("state")
            if self.state:
                self._fill_steps(self.state)
                self.planning.fill_planned()
        elif purpose == "pipelines":
            self.planning.set_pipelines(list(result or []))
        elif purpose == "targets":
            self.target_box.fill_targets(list(result or []))
        elif purpose == "bisect":
            self.bisect.on_bisect_reply(result)
        elif purpose == "repro":
            self.bisect.on_repro_reply(result)

    def on_error(self, purpose: str, error: dict) -> None:
        if purpose == "code_totals":
            self.counts.on_code_error(error)
            return
        message = error.get("message", "failed")
        if purpose == "bisect":
            message = "Find first bad pass: " + message.splitlines()[0]
            self.bisect.bisect_failed()
        elif purpose == "repro":
            message = "Write repro folder: " + message.splitlines()[0]
        if purpose == "target":
            message = self._kept_message = self.target_box.on_target_error(error)
        if purpose == "paste":  # the pipeline is unchanged: say why the text was refused
            # the caret under the column only lines up in the tooltip's fixed-width text
            full = message + (f"\nhint: {error['hint']}" if error.get("hint") else "")
            self.info.setToolTip(f"<pre>{html.escape(full)}</pre>")
            message = "Paste pipeline: " + message.splitlines()[0] + " (pipeline unchanged)"
            self._kept_message = message  # the unchanged state that follows must not hide it
        self.info.setText(message)

    # -- state -----------------------------------------------------------------------------------
    def on_state(self, state: State, prev: State | None) -> None:
        self.steps = list(state.get("steps") or [])
        self.planned = list(state.get("planned") or [])
        self._fill_steps(state)
        self.planning.show_plan()
        self.target_box.show_target(state)
        self._update_buttons()
        if state.get("model"):
            theirs = sum(1 for s in self.steps if s.get("origin") == "schedule")
            cur = self.cursor_of(state)
            total = len(self.steps) - 1 + len(self.planned)
            self.info.setText(f"{state.get('model')} · step {cur} of {total}"
                              + (f" · {len(self.planned)} planned" if self.planned else " · done")
                              + (f" · steps 1–{theirs} are your schedule()" if theirs else "")
                              + (f" · {chosen['name']} planned after step {chosen['step']}"
                                 if (chosen := self.planning.chosen) else "")
                              + (f" · target {state['target']}" if state.get("target") else "")
                              + (f" · weights as inputs: {state['params_file']}"
                                 if state.get("keep_params") and state.get("params_file") else ""))
            verdict = self.bisect.verdict_text(cur)
            if self._kept_message:
                self.info.setText(self._kept_message)
                self._kept_message = None
            elif verdict is not None:
                self.info.setText(verdict)
            else:
                self.info.setToolTip(state.get("pipeline_text") or "")
        else:
            self.say_no_model()

    def is_filled(self) -> bool:
        return bool(self.steps)

    def restore_settings(self, settings) -> None:
        self.hide_unchanged.setChecked(settings.value("pipeline/hide_unchanged", False, type=bool))

    def save_settings(self, settings) -> None:
        settings.setValue("pipeline/hide_unchanged", self.hide_unchanged.isChecked())

    def restyle(self) -> None:
        """The step rows carry colours of the old theme."""
        if self.state:
            self._fill_steps(self.state)

    def _fill_steps(self, state: State) -> None:
        c = themes.colors()
        cursor = self.cursor_of(state)
        self.table.blockSignals(True)
        self.table.setRowCount(len(self.steps))
        bold = QFont(self.table.font())
        bold.setBold(True)
        before = None  # the code totals of the step before, for a jump
        verdicts = self.bisect.verdicts()
        for r, s in enumerate(self.steps):
            changed = s.get("changed", True) or s.get("index") == 0
            details = []
            for key, word in STEP_LISTS:
                if s.get(key):
                    details.append(f"{word}{len(s[key])}")
            size = s.get("size")
            entry = self._trace_entry(s)
            run_ms = err = ""
            if entry is not None:
                run_ms = fmt_ms(entry["tvm_ms"]) if entry.get("ok") and entry.get("tvm_ms") else "✗"
                err = _err_text(entry.get("max_abs_error")) if entry.get("ok") else ""
            theirs = s.get("origin") == "schedule"  # a primitive of the learner's schedule(sch)
            line = (s.get("params") or {}).get("line")
            cells = [str(s.get("index", r)), s.get("pass", "") + (f" · line {line}" if theirs and line else ""),
                     f"{1000 * float(s.get('seconds') or 0):.1f}",
                     ("attributes only" if s.get("changed_what") == "attrs" else ("yes " + " ".join(details)).strip()) if s.get("changed") else
                     ("—" if s.get("index") else "import"),
                     *("" if size is None or size.get(k) is None else str(size.get(k)) for k in SIZE_KEYS),
                     run_ms, err]
            code = self.counts.code_cells(s, before)
            before = self.counts.code_entry(s) or before
            cells += [text for text, _tip, _drop in code]
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setData(Qt.ItemDataRole.UserRole, s.get("index", r))
                if col == 1 and theirs:
                    p = s.get("params") or {}
                    tip = "\n".join(x for x in (f"{s.get('pass')}: a primitive of your schedule(sch)",
                                                 f"line {line}: {p.get('code', '')}" if line else "",
                                                 f"as the trace replays it: {p['trace']}" if p.get("trace") else "")
                                     if x)
                    font = QFont(self.table.font())
                    font.setItalic(True)
                    item.setFont(font)
                    item.setToolTip(tip)
                elif col == 1:
                    tip = s.get("pass", "")
                    if s.get("params"):
                        tip += f"({params_text(s['params'])})"
                    if r:
                        tip += f"\n{self.planning.origin(s.get('pass', ''))}"
                    for key, _word in STEP_LISTS:
                        if s.get(key):
                            tip += f"\n{key.replace('_funcs', '')}: {', '.join(s[key][:12])}"
                    item.setToolTip("\n".join([tip, *s.get("notes", [])]))
                if not changed:
                    item.setForeground(QBrush(QColor(c.dim_text)))
                if s.get("index") == cursor:
                    item.setFont(bold)
                    item.setBackground(QBrush(QColor(c.current_line)))
                if col == 3 and s.get("changed") and s.get("index"):
                    item.setForeground(QBrush(QColor(c.ok)))
                if col >= 4:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if col in (COL_RUN, COL_ERR) and entry is not None:
                    if not entry.get("ok"):
                        item.setForeground(QBrush(QColor(c.bad)))
                        item.setToolTip(f"not built: {entry.get('error') or 'unknown error'}")
                    elif entry.get("allclose") is False:
                        item.setForeground(QBrush(QColor(c.bad)))
                        item.setToolTip("outputs differ from PyTorch")
                if col >= COL_VEC:
                    _text, tip, dropped = code[col - COL_VEC]
                    item.setToolTip(tip)
                    if dropped:
                        item.setForeground(QBrush(QColor(c.bad)))
                verdict = verdicts.get(s.get("index"))
                if verdict is not None and col in (0, 1):
                    item.setForeground(QBrush(QColor(c.ok if verdict["ok"] else c.bad)))
                    if col == 0:
                        item.setText(f"{'✓' if verdict['ok'] else '✗'} {s.get('index', r)}")
                    if not verdict["ok"]:
                        item.setToolTip(f"{verdict.get('stage')}: {verdict.get('reason')}")
                self.table.setItem(r, col, item)
        self.table.blockSignals(False)
        self.table.horizontalHeader().resizeSection(
            1, min(self.table.sizeHintForColumn(1), PASS_COLUMN_MAX))
        self._filter()
        if cursor is not None and (cursor_item := self.table.item(cursor, 0)) is not None:
            self.table.scrollToItem(cursor_item)

    def _trace_entry(self, step: StepEntry) -> dict | None:
        """The latency trace's entry of a step, while the step is still the same pass."""
        e = self.trace.get(step.get("index"))
        if e is None or self.trace_stamp is None or \
                self.trace_stamp.stale_reason(self.state, step.get("index")) is not None:
            return None
        return e

    def _on_any_reply(self, _rid: int, cmd: str, result) -> None:
        # the Run pane asks for the trace; its reply reaches every listener of the bridge
        if cmd == "latency_trace" and isinstance(result, dict):
            self.set_trace(result.get("trace") or [])

    def set_trace(self, trace: list[dict]) -> None:
        self.trace_stamp = ResultStamp.of(self.state)
        self.trace = {int(e["step"]): dict(e) for e in trace if e.get("step") is not None}
        if self.state:
            self._fill_steps(self.state)

    def on_reset(self) -> None:
        super().on_reset()
        self.trace = {}
        self.trace_stamp = None
        self.planning.chosen = None  # a named pipeline chosen after a step of the model before
        self.bisect.reset()
        self.counts.reset()

    def _filter(self) -> None:
        hide = self.hide_unchanged.isChecked()
        for r, s in enumerate(self.steps):
            self.table.setRowHidden(r, hide and not s.get("changed") and s.get("index") != 0)

    def visible_steps(self) -> list[int]:
        return [self._row_index(r) for r in range(self.table.rowCount()) if not self.table.isRowHidden(r)]

    def _row_index(self, row: int) -> int:
        item = self.table.item(row, 0)
        return int(item.data(Qt.ItemDataRole.UserRole)) if item is not None else row

    def _step_clicked(self) -> None:
        rows = {i.row() for i in self.table.selectedItems()}
        if rows:
            self.hub.select_step(self._row_index(min(rows)))

    def _update_buttons(self) -> None:
        has = bool(self.state and self.state.get("model"))
        self.bisect.update_buttons(has)
        cursor = self.cursor_of(self.state) or 0
        self.planning.update_buttons(has)
        self.back_button.setEnabled(has and cursor > 0)
        self.step_button.setEnabled(has and (bool(self.planned) or cursor < len(self.steps) - 1))
        self.run_button.setEnabled(has and (bool(self.planned) or cursor < len(self.steps) - 1))

    def _refill(self) -> None:
        if self.state:
            self._fill_steps(self.state)

    def _show_code_columns(self, row: int) -> None:
        # the columns are the table's last: bring them into view
        if (item := self.table.item(row, self.table.columnCount() - 1)) is not None:
            self.table.scrollToItem(item)

    # -- actions ---------------------------------------------------------------------------------
    def step(self) -> None:
        self.bridge.request("step")

    def back(self) -> None:
        self.bridge.request("back")

    def run_to_end(self) -> None:
        self.bridge.request("run_to_end")

    def jump(self, index: int) -> None:
        self.bridge.request("jump", index=int(index))
