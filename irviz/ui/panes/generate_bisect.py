"""The Generate tab's "Bisect this step": after a generation whose tokens (or logits) part from torch's,
the engine's `generate_bisect` checks the program that made the first wrong token (prefill, or
decode at that step) pass by pass on that step's inputs as torch computed them. The verdict shows
here, and `bisected` hands the reply to the window, which shows it as Find first bad pass shows
its own (the program chosen, the bad step jumped to, its diverging bindings marked, the first one
selected).

The verdict is for the bisected program's passes up to the step the generation ran at: moving
the cursor back along them (the jump to the bad step does) keeps it; another pipeline for that
program, another model or target greys it."""
from __future__ import annotations

import json
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QLabel, QPushButton, QWidget

from irviz.protocol.commands import State
from irviz.ui import themes
from irviz.ui.panes.base import dim_label
from irviz.ui.result_stamp import ResultSlot, ResultStamp



def bisect_step(r: dict | None) -> int | None:
    """The generated token whose step to bisect: the first that differs, else the first whose
    logits differ; None when both match."""
    if not r:
        return None
    if r.get("first_mismatch"):
        return int(r["first_mismatch"]["step"])
    return next((int(x["step"]) for x in r.get("logits") or [] if not x.get("allclose", True)), None)


def generation_gone(spec: str | None, max_len: int | None, target: str | None, state: State | None) -> str | None:
    """Why a generation result is not for the open state (another model or length, or target); None
    when it still is."""
    gen = state.get("generation") if state else None
    if not gen or not state or state.get("spec") != spec or gen.get("max_len") != max_len:
        return f"for {spec} opened for generation, which is no longer open"
    if (gen.get("target") or "host") != (target or "host"):
        return f"for the target {target or 'host'}, not {gen.get('target') or 'host'}"
    return None


def _entry(step) -> str:
    """A state's step as the generation's stamp lists passes: "name {params}"."""
    return f"{step.get('pass')} {json.dumps(step.get('params') or {}, sort_keys=True, default=str)}"


@dataclass(frozen=True)
class StepBisectStamp(ResultStamp):
    """What a bisect of a generation step is for: the model opened for generation, its target, and
    the bisected program's passes up to the step the generation ran at."""
    spec: str | None = None
    max_len: int | None = None
    program: str = ""
    passes: tuple = ()   # the program's ("name {params}", ...) then

    @classmethod
    def of_bisect(cls, r: dict) -> StepBisectStamp:
        s = r.get("stamp") or {}
        program = str(r.get("program") or "")
        return cls(model=None, pipeline=(), target=s.get("target"), spec=s.get("spec"), max_len=s.get("max_len"),
                   program=program, passes=tuple((s.get("passes") or {}).get(program) or ()))

    def stale_reason(self, state: State | None, step: int | None = None) -> str | None:
        gone = generation_gone(self.spec, self.max_len, self.target, state)
        gen = state.get("generation") if state else None
        if gone or not state or not gen:
            return gone
        then = self.passes
        if gen.get("program") == self.program:  # every recorded step is in the state
            now = tuple(_entry(s) for s in (state.get("steps") or [])[1:])[:len(then)]
        else:  # only the passes up to its cursor are
            info: dict = dict(gen["programs"].get(self.program) or {})
            at = tuple(info.get("at") or ())
            now, then = at[:len(then)], then[:len(at)]
        if now != then:
            return f"for the {self.program} program's previous pipeline"
        return None


def verdict_text(r: dict) -> str:
    fb = r.get("first_bad")
    where = f"the {r.get('program')} program on token step {r.get('token_step')}'s inputs"
    if fb is None:
        return (f"Bisect of {where}: every step matches torch (checked {len(r.get('steps_checked') or [])}); "
                "no single pass breaks this step's numbers")
    text = f"Bisect of {where}: first bad pass step {fb['index']} {fb['pass']} ({fb['stage']})"
    d = r.get("diverging") or {}
    if d.get("first"):
        op = f" = {d['first_op']}" if d.get("first_op") else ""
        text += f"; first diverging binding {d['first']}{op} (FX {d.get('first_fx')}), selected"
    return text


class GenerateBisect(QObject):
    """The button, the verdict and its stale note; owned by the Generate tab, which places them and
    tells it of states and generation results."""

    bisected = Signal(dict)   # a bisect reply: the window shows it in the Pipeline pane

    def __init__(self, bridge, parent: QWidget):
        super().__init__(parent)
        self.bridge = bridge
        self.result: dict | None = None
        self._rid: int | None = None
        self._step: int | None = None   # the step the shown generation result would bisect
        self._torch_tokens: list[int] = []  # its torch tokens: the engine feeds them to torch's steps
        self.button = QPushButton("Bisect this step")
        self.button.setObjectName("GenerateBisectButton")
        self.button.setToolTip("Check the program that made the first wrong token pass by pass on that "
                               "step's inputs as torch computed them (its KV cache, not TVM's), and show "
                               "the first pass whose build breaks the numbers")
        self.button.clicked.connect(lambda: self.bisect())
        self.button.setVisible(False)
        self.info = QLabel("")
        self.info.setWordWrap(True)
        self.info.setObjectName("GenerateBisectVerdict")
        self.note = dim_label("")
        self.slot = ResultSlot([self.info], self.note)
        bridge.replied.connect(self._on_replied)
        bridge.failed.connect(self._on_failed)
        bridge.progress.connect(self._on_progress)

    def widgets(self) -> list[QWidget]:
        return [self.button, self.info, self.note]

    def on_result(self, r: dict | None) -> None:
        """A generation result came: the step its mismatch would bisect (None: nothing to bisect); a
        verdict shown was of the generation before."""
        self.clear()
        self._step = bisect_step(r)
        self._torch_tokens = [int(t) for t in (r or {}).get("torch_tokens") or []]
        self.button.setText("Bisect this step" if self._step is None else f"Bisect step {self._step}")

    def on_state(self, state: State | None, generation_stale: bool) -> None:
        self.button.setVisible(self._step is not None)
        self.button.setEnabled(self._step is not None and not generation_stale and self._rid is None)
        self.slot.check(state)

    def bisect(self) -> int | None:
        if self._step is None:
            return None
        args: dict = {"step": int(self._step)}
        if self._torch_tokens:
            args["torch_tokens"] = self._torch_tokens
        self._rid = self.bridge.request("generate_bisect", **args)
        self.button.setEnabled(False)
        self.info.setStyleSheet("")
        self.info.setText(f"Bisecting token step {self._step}: torch's inputs of that step, then the "
                          "program's steps built and run on them…")
        return self._rid

    def _on_progress(self, rid: int, text: str, _fraction: float) -> None:
        if rid == self._rid and text.startswith("Bisect"):
            self.info.setText(text)

    def _on_replied(self, rid: int, cmd: str, result) -> None:
        if rid != self._rid:
            return
        self._rid = None
        self.show_result(dict(result or {}))

    def _on_failed(self, rid: int, cmd: str, error: dict) -> None:
        if rid != self._rid:
            return
        self._rid = None
        error = error or {}
        self.info.setText("Bisect cancelled." if error.get("stage") == "cancelled" else
                          f"Bisect failed: {error.get('message') or 'failed'}"
                          + (f"\nhint: {error['hint']}" if error.get("hint") else ""))
        self.info.setStyleSheet(f"color: {themes.colors().bad};")
        self.button.setEnabled(True)

    def show_result(self, r: dict) -> None:
        self.result = r
        c = themes.colors()
        self.info.setText(verdict_text(r))
        self.info.setToolTip(r.get("message") or "")
        self.info.setStyleSheet(f"color: {c.bad if r.get('first_bad') else c.ok};")
        self.slot.set(StepBisectStamp.of_bisect(r))
        self.bisected.emit(r)

    def clear(self) -> None:
        self.result = None
        self.info.setText("")
        self.slot.clear()
