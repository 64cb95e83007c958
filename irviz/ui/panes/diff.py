"""Diff pane: what a step changed. Follows the cursor (step vs previous) unless the user picked a
step in the pipeline pane or two steps here.  In Kernel code mode it compares one kernel's code
(assembly, LLVM IR or GPU source) between the two steps, or between two targets of one step."""
from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QSpinBox, QVBoxLayout

from irviz.protocol.commands import State
from irviz.ui.panes.base import Pane, dim_label
from irviz.ui.panes.code_diff_bar import CodeDiffBar
from irviz.ui.result_stamp import step_identity
from irviz.ui.widgets.diff_view import DiffView


def _side_text(side: dict) -> str:
    c = side.get("counts")
    where = f"step {side.get('step')} {side.get('target_name')}"
    if c is None:
        return f"{where}: no such kernel" if not side.get("error") else f"{where}: not compiled"
    if side.get("kind") not in (None, "llvm"):
        return f"{where}: {c.get('shared_bytes', 0)} B shared, {c.get('barriers', 0)} barriers"
    bits = c.get("vector_bits") or {}
    top = max((b for b in bits if str(b).isdigit()), key=int, default=None)
    return (f"{where}: {c.get('instructions', 0)} instr, {c.get('vector', 0)} vector"
            + (f" (≤{top}-bit)" if top else "") + f", {c.get('fma', 0)} FMA")


def code_diff_text(r: dict) -> str:
    """'matmul (Assembly): step 3 x86-avx2: 812 instr, … → step 3 x86-avx512: …; 40 lines differ'."""
    a, b = r.get("a") or {}, r.get("b") or {}
    rows = [x for f in r.get("functions") or [] for x in f.get("rows") or []]
    n = sum(1 for x in rows if x[4] != "equal")
    return (f"{r.get('kernel', '')} ({r.get('format', '')}): {_side_text(a)} → {_side_text(b)} · "
            + (f"{n} line{'s' if n != 1 else ''} differ" if n else "same code"))


class DiffPane(Pane):
    def __init__(self, bridge, hub, parent=None, settings=None):
        super().__init__(bridge, hub, parent, settings=settings)
        self.result: dict | None = None
        self.pair: tuple[int, int] | None = None
        self._shown = None
        # the last bisect's diverging bindings (backend.diverging): marked in their step's diff
        self.diverging: dict = {}

        self.a_box = QSpinBox()
        self.b_box = QSpinBox()
        for box in (self.a_box, self.b_box):
            box.setRange(0, 0)
            box.valueChanged.connect(self._boxes_changed)
        self.follow = QCheckBox("Follow cursor")
        self.follow.setChecked(True)
        self.follow.setToolTip("Show the current step against the previous one")
        self.follow.toggled.connect(lambda on: self._follow_cursor() if on else None)
        self.info = dim_label("")
        self.view = DiffView()
        self.code_bar = CodeDiffBar()
        self.code_bar.changed.connect(self._code_changed)

        bar = QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(QLabel("Step"))
        bar.addWidget(self.a_box)
        bar.addWidget(QLabel("→"))
        bar.addWidget(self.b_box)
        bar.addWidget(self.follow)
        bar.addWidget(self.info, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.setSpacing(3)
        lay.addLayout(bar)
        lay.addWidget(self.code_bar)
        lay.addWidget(self.view, 1)

        hub.stepSelected.connect(self.show_step)
        hub.divergingMarked.connect(self.set_diverging)
        hub.tirFunctionSelected.connect(self.code_bar.set_kernel)
        self.ask("targets", "list_targets")  # the code mode's target boxes

    def set_diverging(self, marks: dict) -> None:
        self.diverging = dict(marks or {})
        if self.result is not None:
            self._mark()
            self.view.set_diff(self.result)
            self._say()

    def on_reset(self) -> None:
        super().on_reset()
        self.diverging = {}

    def _marks_here(self) -> dict:
        d = self.diverging
        return d.get("bindings") or {} if d and self.pair and self.pair[1] == d.get("step") else {}

    def _mark(self) -> None:
        self.view.set_marked_bindings(self._marks_here(), self.diverging.get("first"))

    def on_state(self, state: State, prev: State | None) -> None:
        cursor = self.cursor_of(state)
        if cursor is None:
            self.result = None
            self.pair = None
            self._shown = None
            self.view.clear()
            self.info.setText("")
            return
        self.code_bar.set_kernels(list(state.get("tir_functions") or []))
        last = max(0, len(state.get("steps") or []) - 1)
        for box in (self.a_box, self.b_box):
            box.blockSignals(True)
            box.setRange(0, last)
            box.blockSignals(False)
        if self.model_key(state) != self.model_key(prev):
            self._shown = None
            self.follow.setChecked(True)
        if self.follow.isChecked():
            self._follow_cursor()
        elif self.pair and self.pair[1] > last:
            self._follow_cursor()
        elif self.pair:
            self._request(*self.pair)  # asked again only if those steps are other steps now

    def _follow_cursor(self) -> None:
        cursor = self.cursor_of(self.state)
        if cursor is not None:
            self._request(max(0, cursor - 1), cursor)

    def show_step(self, index: int) -> None:
        """The diff of step ``index`` against the one before it (from a click in the pipeline)."""
        cursor = self.cursor_of(self.state)
        if cursor is None:
            return
        self.follow.blockSignals(True)
        self.follow.setChecked(index == cursor)
        self.follow.blockSignals(False)
        self._request(max(0, index - 1), index)

    def show_pair(self, a: int, b: int) -> None:
        """The diff between steps a and b; the pane stops following the cursor."""
        self.follow.blockSignals(True)
        self.follow.setChecked(False)
        self.follow.blockSignals(False)
        self._request(a, b)

    def _boxes_changed(self, _v) -> None:
        a, b = self.a_box.value(), self.b_box.value()
        if (a, b) != self.pair:
            self.show_pair(a, b)

    def _code_changed(self) -> None:
        if self.pair is not None:
            self._request(*self.pair)

    def _request(self, a: int, b: int) -> None:
        code = self.code_bar.request_args() if self.code_bar.code_mode() else None
        key = (a, b, self.model_key(self.state), step_identity(self.state, max(a, b)),
               tuple(sorted((code or {}).items())) if code else self.code_bar.code_mode())
        self.pair = (a, b)
        for box, v in ((self.a_box, a), (self.b_box, b)):
            box.blockSignals(True)
            box.setValue(v)
            box.blockSignals(False)
        if key == self._shown:
            return
        self._shown = key
        self.result = None
        if self.code_bar.code_mode():
            self._request_code(a, b, code)
            return
        if a == b:
            self.view.set_diff(None)
            self.result = {"unified": "", "functions": []}
            self.info.setText("same step: nothing to compare")
            self.filledChanged.emit()
            return
        self.info.setText("computing diff…")
        self.ask("diff", "diff", a=a, b=b)

    def _request_code(self, a: int, b: int, code: dict | None) -> None:
        if code is None:
            self.view.set_diff(None)
            self.result = {"unified": "", "functions": []}
            self.info.setText("choose a kernel (or select one in TensorIR)")
            self.filledChanged.emit()
            return
        if a == b and code["target_a"] == code["target_b"]:
            self.view.set_diff(None)
            self.result = {"unified": "", "functions": []}
            self.info.setText("same step on the same target: choose another step or target")
            self.filledChanged.emit()
            return
        self.info.setText(f"compiling {code['kernel']} of step {a} for {code['target_a']} and of step "
                          f"{b} for {code['target_b']}…")
        self.ask("code", "kernel_code_diff", a=a, b=b, **code)

    def on_reply(self, purpose: str, result) -> None:
        if purpose == "targets":
            self.code_bar.fill_targets(list(result or []))
            return
        if purpose not in ("diff", "code"):
            return
        if (purpose == "code") != self.code_bar.code_mode():
            return  # asked before the mode changed
        self.result = result or {"unified": "", "functions": []}
        self._mark()
        self.view.set_diff(self.result)
        self._say()

    def _say(self) -> None:
        if self.code_bar.code_mode():
            self.info.setText(code_diff_text(self.result or {}))
            return
        names = {s.get("index"): s.get("pass") for s in (self.state.get("steps") if self.state else None) or []}
        a, b = self.pair or (0, 0)
        n = len((self.result or {}).get("functions") or [])
        text = (f"{names.get(a, a)} → {names.get(b, b)}: "
                + (f"{n} function{'s' if n != 1 else ''} differ" if n else "no change"))
        cursor = self.cursor_of(self.state)
        if not self.follow.isChecked() and cursor is not None and b != cursor:
            # a click in the Pipeline pane picked this pair: say so, or the cursor seems ignored
            text += f" · not the cursor's step {cursor}: tick Follow cursor to go back to it"
        marks = self._marks_here()
        if marks:
            first = self.diverging.get("first")
            text += (f" · ✗ marked: {len(marks)} binding{'s' if len(marks) != 1 else ''} of main whose "
                     f"values diverge from torch (first {first}, FX {self.diverging.get('first_fx')})")
        self.info.setText(text)

    def on_error(self, purpose: str, error: dict) -> None:
        if purpose == "targets":  # the boxes keep host, and any target can still be typed
            return
        self.result = {"unified": "", "functions": []}
        self._shown = None
        self.view.clear()
        self.info.setText(f"diff failed: {error.get('message', '')}")

    def restore_settings(self, settings) -> None:
        self.view.set_mode(str(settings.value("diff/mode", "side")))

    def save_settings(self, settings) -> None:
        settings.setValue("diff/mode", self.view.mode)

    def restyle(self) -> None:
        self.view.restyle()

    def is_filled(self) -> bool:
        return self.cursor_of(self.state) is None or self.result is not None
