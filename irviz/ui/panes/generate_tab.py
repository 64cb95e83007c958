"""The Run pane's "Generate" tab: for a causal LM opened for generation, Generate N tokens builds the
prefill and decode programs at their cursors, generates greedily in TVM and with transformers'
generate(do_sample=False) (the engine's `generate`) and shows whether the token ids match (the
first differing step if not), prefill ms, decode ms per token and tokens/s of TVM and torch eager,
and whether those timings can be trusted.

The result is for both programs at the steps they were at: it goes stale when either program's
pipeline up to its cursor changes (choosing the other program to look at does not), or when
another model is opened."""
from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from PySide6.QtWidgets import (QFrame, QHBoxLayout, QHeaderView, QLabel, QPushButton, QScrollArea, QSpinBox,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from irviz.protocol.commands import State, empty_state
from irviz.protocol.result_types import GenerateResult
from irviz.ui import themes
from irviz.ui.panes.base import dim_label, row_table
from irviz.ui.panes.generate_bisect import GenerateBisect, generation_gone
from irviz.ui.result_stamp import ResultSlot, ResultStamp

PROGRAMS = ("prefill", "decode")
NO_GENERATION = ("Open a causal LM for generation (File ▸ Open for generation…, or `irviz MODEL "
                 "--generate`) to generate tokens with its prefill and decode programs here.")
ROWS = (("prefill_ms", "Prefill ms"), ("decode_ms_per_token", "Decode ms / token"), ("tokens_per_s", "Tokens / s"))


@dataclass(frozen=True)
class GenerationStamp(ResultStamp):
    """What a generation run is for: the model opened for generation and both programs' passes up
    to their cursors (as the state's `generation.programs[p].at` lists them)."""
    spec: str | None = None
    max_len: int | None = None
    passes: tuple = ()  # ((program, (pass, ...)), ...)

    @classmethod
    def of_result(cls, r: dict) -> GenerationStamp:
        s = r.get("stamp") or {}
        passes = tuple((p, tuple((s.get("passes") or {}).get(p) or ())) for p in PROGRAMS)
        return cls(model=None, pipeline=(), target=s.get("target"), spec=s.get("spec"),
                   max_len=s.get("max_len"), passes=passes)

    def stale_reason(self, state: State | None, step: int | None = None) -> str | None:
        gone = generation_gone(self.spec, self.max_len, self.target, state)
        gen = state.get("generation") if state else None
        if gone or not state or not gen:
            return gone
        for program, then in self.passes:
            info = gen["programs"].get(program)
            now = tuple(info["at"]) if info else ()
            if now != then:
                where = f"step {len(then)}" + (f" ({then[-1].split(' ')[0]})" if then else "")
                return (f"for the {program} program at {where}; it is at step {len(now)} now" if
                        now[:len(then)] == then or then[:len(now)] == now else
                        f"for the {program} program's previous pipeline")
        return None


def _ms(v) -> str:
    return "—" if v is None else f"{float(v):.4g}"


def verdict_text(r: GenerateResult) -> tuple[str, bool]:
    """('Tokens match: 8 of 8 …', ok)."""
    tvm, ref = list(r.get("tvm_tokens") or []), list(r.get("torch_tokens") or [])
    if r.get("tokens_match"):
        logits = r.get("logits_max_abs_error")
        extra = f"; logits max abs error {logits:.3g}" if logits is not None else ""
        return (f"Tokens match: TVM generated the same {len(tvm)} token ids as torch generate"
                f"(do_sample=False){extra}", True)
    m = r.get("first_mismatch") or {}
    return (f"Tokens differ from step {m.get('step', '?')}: TVM {m.get('tvm', '?')}, torch "
            f"{m.get('torch', '?')} ({sum(a == b for a, b in zip(tvm, ref))} of {len(ref)} equal)", False)


def stamp_text(r: GenerateResult) -> str:
    s = r.get("stamp") or {}
    steps = s.get("steps") or {}
    passes = s.get("passes") or {}

    def at(p: str) -> str:
        last = (passes.get(p) or [""])[-1].split(" ")[0] if passes.get(p) else "import"
        return f"{p} at step {steps.get(p, '?')} ({last})"

    return (f"For {s.get('model', '?')}: {at('prefill')}, {at('decode')}; target {s.get('target') or 'host'}; "
            f"cache of {s.get('max_len')} positions, prompt {r.get('prompt_len', '?')}")


class GenerateTab(QWidget):
    """Sends `generate` through the bridge itself and keeps its own result; `on_state` follows the
    engine's states (typed like a pane's)."""

    def __init__(self, bridge, parent=None):
        super().__init__(parent)
        self.bridge = bridge
        self.state: State | None = None
        self.result: GenerateResult | None = None
        self._rid: int | None = None
        self.repeats = 10  # timed runs per figure
        self.button = QPushButton("Generate")
        self.button.setObjectName("GenerateButton")
        self.button.setToolTip("Build prefill and decode at their cursors, generate greedily in TVM and "
                               "with torch generate(do_sample=False), compare the token ids, time both")
        self.button.clicked.connect(self.generate)
        self.tokens = QSpinBox()
        self.tokens.setRange(1, 4096)
        self.tokens.setSuffix(" tokens")
        self.tokens.setValue(8)
        self.status = dim_label(NO_GENERATION)
        self.status.setWordWrap(True)
        self.status.setObjectName("GenerateStatus")
        self.verdict = QLabel("")
        font = self.verdict.font()
        font.setBold(True)
        self.verdict.setFont(font)
        self.verdict.setWordWrap(True)
        self.verdict.setObjectName("GenerateVerdict")
        self.ids = dim_label("")
        self.ids.setWordWrap(True)
        self.figures = row_table(["", "TVM", "torch eager"])
        self.figures.setRowCount(len(ROWS))
        for i, (_, label) in enumerate(ROWS):
            self.figures.setItem(i, 0, QTableWidgetItem(label))
        self.figures.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.figures.verticalHeader().setDefaultSectionSize(22)
        self.figures.setFixedHeight(self.figures.horizontalHeader().sizeHint().height() + 22 * len(ROWS) + 8)
        self.timing = dim_label("")
        self.timing.setWordWrap(True)
        self.timing.setObjectName("GenerateTiming")
        self.stamp = dim_label("")
        self.stamp.setWordWrap(True)
        self.note = dim_label("")
        top = QHBoxLayout()
        top.addWidget(self.button)
        top.addWidget(self.tokens)
        top.addWidget(self.status, 1)
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.setContentsMargins(0, 0, 4, 0)
        # a mismatch offers the bisect of its step right under the verdict that names it
        self.step_bisect = GenerateBisect(bridge, self)
        for w in (self.note, self.verdict, *self.step_bisect.widgets(), self.ids, self.figures, self.timing,
                  self.stamp):
            lay.addWidget(w)
        lay.addStretch(1)
        scroll = QScrollArea()  # the Run dock is short: the figures scroll rather than squeeze
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(body)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 4, 0, 0)
        outer.addLayout(top)
        outer.addWidget(scroll, 1)
        self.slot = ResultSlot([self.verdict, self.ids, self.figures, self.timing, self.stamp], self.note)
        bridge.replied.connect(self._on_replied)
        bridge.failed.connect(self._on_failed)
        self.on_state(empty_state(), None)

    # -- state ----------------------------------------------------------------------------------
    def on_state(self, state: State, prev: State | None) -> None:
        self.state = state
        gen = state.get("generation")
        was = prev.get("generation") if prev else None
        only = bool(state.get("structure_only"))
        self.button.setEnabled(bool(gen) and not only and self._rid is None)
        if gen and (not was or (prev and prev.get("spec") != state.get("spec"))):
            self.tokens.setValue(int(gen["tokens"]))
        if gen:
            self.tokens.setMaximum(max(1, int(gen["max_len"]) - int(gen["prompt_len"])))
        if self._rid is None and self.result is None:
            self.status.setText(NO_GENERATION if not gen else
                                "A model without weights cannot generate: its cache's bytes are in the Memory tab"
                                if only else f"Generate {self.tokens.value()} tokens with the prefill and decode "
                                "programs at their cursors and compare with torch generate.")
        self.slot.check(state)
        self.step_bisect.on_state(state, self.slot.stale)

    def generate(self) -> int | None:
        gen = self.state.get("generation") if self.state else None
        if not gen:
            return None
        n = self.tokens.value()
        self._rid = self.bridge.request("generate", tokens=n, repeats=self.repeats)
        self.button.setEnabled(False)
        self.status.setStyleSheet("")
        self.status.setText(f"Generating {n} tokens: building prefill and decode, then TVM and torch generate, "
                            "then timing both…")
        return self._rid

    # -- replies --------------------------------------------------------------------------------
    def _on_replied(self, rid: int, cmd: str, result) -> None:
        if rid != self._rid:
            return
        self._rid = None
        self.show_result(cast(GenerateResult, result or {}))
        self.on_state(self.state or empty_state(), self.state)

    def _on_failed(self, rid: int, cmd: str, error: dict) -> None:
        if rid != self._rid:
            return
        self._rid = None
        error = error or {}
        msg = error.get("message") or "failed"
        self.status.setText("Cancelled." if error.get("stage") == "cancelled" else
                            f"Generation failed: {msg}" + (f"\nhint: {error['hint']}" if error.get("hint") else ""))
        self.status.setStyleSheet(f"color: {themes.colors().bad};")
        self.status.setToolTip(error.get("detail") or "")
        self.on_state(self.state or empty_state(), self.state)

    def show_result(self, r: GenerateResult) -> None:
        c = themes.colors()
        self.result = r
        text, ok = verdict_text(r)
        self.verdict.setText(text)
        self.verdict.setStyleSheet(f"color: {c.ok if ok else c.bad};")
        self.verdict.setToolTip(r.get("mismatch") or "")
        self.ids.setText(f"TVM    {r.get('tvm_tokens')}\ntorch  {r.get('torch_tokens')}")
        raw = dict(r)
        for i, (key, _) in enumerate(ROWS):
            pair = cast(dict, raw.get(key) or {})
            for j, side in enumerate(("tvm", "torch"), start=1):
                self.figures.setItem(i, j, QTableWidgetItem(_ms(pair.get(side))))
        tvm, ref = (r.get("decode_ms_per_token") or {}).get("tvm"), (r.get("decode_ms_per_token") or {}).get("torch")
        ratio = f"; TVM decodes {ref / tvm:.3g}× as fast as torch eager" if tvm and ref and r.get("reliable") else ""
        if r.get("reliable") is False:
            reason = str(r.get("reason") or "")
            first = reason.split(";")[0]
            self.timing.setText(f"Timings unreliable: {first}" + (" … (hover for all)" if first != reason else ""))
            self.timing.setToolTip(reason.replace("; ", "\n"))
            self.timing.setStyleSheet(f"color: {c.bad};")
        else:
            self.timing.setText(f"Timings reliable ({r.get('threads')} threads){ratio}.")
            self.timing.setToolTip("")
            self.timing.setStyleSheet("")
        self.stamp.setText(stamp_text(r))
        self.status.setText("")
        self.status.setStyleSheet("")
        self.slot.set(GenerationStamp.of_result(dict(r)))
        self.slot.check(self.state)
        self.step_bisect.on_result(dict(r))
        self.step_bisect.on_state(self.state, self.slot.stale)
