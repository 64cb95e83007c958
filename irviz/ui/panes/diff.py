"""Diff pane: what a step changed. Follows the cursor (step vs previous) unless the user picked a
step in the pipeline pane or two steps here."""
from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QSpinBox, QVBoxLayout

from irviz.ui.panes.base import Pane, dim_label
from irviz.ui.widgets.diff_view import DiffView


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
        self.follow.toggled.connect(lambda on: on and self._follow_cursor())
        self.info = dim_label("")
        self.view = DiffView()

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
        lay.addWidget(self.view, 1)

        hub.stepSelected.connect(self.show_step)
        hub.divergingMarked.connect(self.set_diverging)

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

    def on_state(self, state: dict, prev: dict) -> None:
        cursor = self.cursor_of(state)
        if cursor is None:
            self.result = None
            self.pair = None
            self._shown = None
            self.view.clear()
            self.info.setText("")
            return
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

    def _request(self, a: int, b: int) -> None:
        key = (a, b, self.model_key(self.state))
        self.pair = (a, b)
        for box, v in ((self.a_box, a), (self.b_box, b)):
            box.blockSignals(True)
            box.setValue(v)
            box.blockSignals(False)
        if key == self._shown:
            return
        self._shown = key
        self.result = None
        if a == b:
            self.view.set_diff(None)
            self.result = {"unified": "", "functions": []}
            self.info.setText("same step: nothing to compare")
            self.filledChanged.emit()
            return
        self.info.setText("computing diff…")
        self.ask("diff", "diff", a=a, b=b)

    def on_reply(self, purpose: str, result) -> None:
        if purpose != "diff":
            return
        self.result = result or {"unified": "", "functions": []}
        self._mark()
        self.view.set_diff(self.result)
        self._say()

    def _say(self) -> None:
        names = {s.get("index"): s.get("pass") for s in (self.state or {}).get("steps") or []}
        a, b = self.pair or (0, 0)
        n = len(self.result.get("functions") or [])
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
