"""What a shown result is for, and the one rule for when it stops being current.

Every result a pane shows (a Build & Run verdict, kernels, the latency chart, intermediates, a
memory plan, a comparison, bisect marks, query matches) is stamped when it is asked for with a
:class:`ResultStamp`: the model, the target and the pipeline as (pass, params) pairs. A step's
identity is the model and target plus the pipeline up to it (the passes ran under the target), so the same step index of another pipeline is another step,
while "back" or re-planning the same passes keeps it. A :class:`ResultSlot` holds the stamp with
the widgets that show the result and greys them with a note when the stamp no longer holds, or
when a newer verdict (a bisect) contradicts them; it shows them again as current if the user
comes back to the same pipeline."""
from __future__ import annotations

import json
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractScrollArea, QGraphicsOpacityEffect, QLabel, QWidget

from irviz.protocol.commands import State
from irviz.ui import themes

STALE_OPACITY = 0.35


def model_key(state: State | None):
    if not state or not state.get("model"):
        return None
    return (state.get("spec"), state.get("importer"), state.get("model"))


def pipeline_of(state: State | None) -> tuple:
    """The applied passes then the planned ones, as ((name, params json), ...)."""
    if not state:
        return ()
    applied = [(s.get("pass"), s.get("params")) for s in (state.get("steps") or [])[1:]]
    planned = [(p.get("name"), p.get("params")) for p in state.get("planned") or []]
    return tuple((name, json.dumps(params or {}, sort_keys=True)) for name, params in applied + planned)


def step_identity(state: State | None, step: int) -> tuple:
    """What makes step `step` of `state` that step: its target and the passes up to it (with the
    model, which panes key on apart). A view cached under it is shown again only for the same step."""
    return (state.get("target") if state else None, pipeline_of(state)[:step])


@dataclass(frozen=True)
class ResultStamp:
    """`step`: the step the result is for, None for one about the whole pipeline (a latency trace,
    a comparison, a bisect); `recorded`: how many steps were recorded then (a result made per
    recorded step lacks the ones applied since)."""
    model: tuple | None
    pipeline: tuple
    step: int | None = None
    pass_name: str = ""
    recorded: int | None = None
    target: str | None = None  # the session's chosen target; None: the host

    @classmethod
    def of(cls, state: State | None, step: int | None = None, per_recorded_step: bool = False) -> ResultStamp:
        """`per_recorded_step`: the result lists every recorded step (a latency trace), so it is
        out of date once more steps are recorded, too."""
        steps = (state.get("steps") if state else None) or []
        name = steps[step].get("pass", "") if step is not None and 0 <= step < len(steps) else ""
        return cls(model_key(state), pipeline_of(state), step, name,
                   len(steps) if per_recorded_step else None, state.get("target") if state else None)

    def what(self, step: int | None = None) -> str:
        step = self.step if step is None else step
        if step is None:
            return "the pipeline"
        name = self.pass_name if step == self.step else ""
        return f"step {step}" + (f" ({name})" if name else "")

    def stale_reason(self, state: State | None, step: int | None = None) -> str | None:
        """None while the result still describes what is open; else why not, for the user.
        `step`: ask about one step of a whole-pipeline result (a bisect's marks)."""
        step = self.step if step is None else step
        if self.model is None or model_key(state) != self.model:
            return (f"for {self.model[2]}, which is no longer open" if self.model
                    else "for no open model")
        target = state.get("target") if state else None
        if target != self.target:
            return f"for the target {self.target or 'host'}, not {target or 'host'}"
        now = pipeline_of(state)
        if step is None:
            if now != self.pipeline:
                return "for the previous pipeline"
            recorded = len((state.get("steps") if state else None) or [])
            if self.recorded is not None and recorded != self.recorded:
                return f"for the {self.recorded} steps recorded then ({recorded} now)"
            return None
        if step > len(now) or now[:step] != self.pipeline[:step]:
            return f"for {self.what(step)} of the previous pipeline"
        return None

    def contradiction(self, ok: bool | None, bisect: dict | None, bisect_stamp: ResultStamp | None,
                      state: State | None) -> str | None:
        """Why a verdict (`ok`: outputs matched, None: no verdict) on this stamp's step is
        contradicted by a bisect made since on the same pipeline, else None."""
        if ok is None or not bisect or bisect_stamp is None or self.step is None:
            return None
        if bisect_stamp.stale_reason(state, self.step) is not None or \
                bisect_stamp.pipeline[:self.step] != self.pipeline[:self.step]:
            return None
        fb = bisect.get("first_bad")
        if ok and fb is not None and self.step >= int(fb.get("index", 0)):
            return (f"contradicted by Find first bad pass: step {fb['index']} ({fb.get('pass')}) "
                    f"is the first bad one")
        if not ok and fb is None:
            return "contradicted by Find first bad pass: every step matches"
        return None


class ResultSlot:
    """One result on screen: its stamp, the widgets that show it and the note that says when it
    is out of date. `note` is shown only while the result is stale."""

    def __init__(self, widgets: list[QWidget], note: QLabel):
        self.widgets = list(widgets)
        self.note = note
        self.stamp: ResultStamp | None = None
        self.reason: str | None = None
        note.setWordWrap(True)
        note.setVisible(False)

    def set(self, stamp: ResultStamp | None) -> None:
        self.stamp = stamp
        self._mark(None)

    def clear(self) -> None:
        self.set(None)

    @property
    def stale(self) -> bool:
        return self.reason is not None

    def check(self, state: State | None, contradiction: str | None = None) -> str | None:
        """Grey the result and say why when it no longer holds (or `contradiction` says a newer
        verdict disagrees); shown as current again when it holds."""
        if self.stamp is None:
            self._mark(None)
            return None
        self._mark(self.stamp.stale_reason(state) or contradiction)
        return self.reason

    def _mark(self, reason: str | None) -> None:
        self.reason = reason
        for w in self.widgets:
            w.setEnabled(reason is None)  # a stale row clicked would select at the wrong step
            for target in faded_parts(w):
                if reason is None:
                    # Qt takes None (no effect); PySide6's stubs do not say so
                    target.setGraphicsEffect(None)  # type: ignore[arg-type]
                elif not isinstance(target.graphicsEffect(), QGraphicsOpacityEffect):
                    effect = QGraphicsOpacityEffect(target)
                    effect.setOpacity(STALE_OPACITY)
                    target.setGraphicsEffect(effect)
        if reason is None:
            self.note.setVisible(False)
            self.note.setText("")
            return
        self.note.setText(f"Stale: {reason}. Greyed until it is run again for what is open now.")
        self.note.setStyleSheet(f"color: {themes.colors().bad};")
        self.note.setVisible(True)


def faded_parts(widget: QWidget) -> list[QWidget]:
    """Where a stale widget's opacity effect goes. A scroll area scrolls and repaints its viewport
    on its own: an effect on the area itself keeps drawing the rows it cached (ghost rows, and
    rows not greyed at all), so the effect goes on the viewport; a widget that holds scroll areas
    has its parts faded one by one for the same reason."""
    if isinstance(widget, QAbstractScrollArea):
        return [widget.viewport()]
    if not widget.findChildren(QAbstractScrollArea):
        return [widget]
    parts: list[QWidget] = []
    for child in widget.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly):
        if not child.isWindow():
            parts += faded_parts(child)
    return parts


def is_faded(widget: QWidget) -> bool:
    """Whether `widget` shows greyed as stale (its parts carry the opacity effect)."""
    return all(isinstance(p.graphicsEffect(), QGraphicsOpacityEffect) for p in faded_parts(widget))
