"""The Run pane's "Memory" tab: StaticPlanBlockMemory's storage tokens and tensor lifetimes of the
cursor step (the engine's ``memory``), drawn by MemoryView; a step before memory planning is
planned on a copy. With a symbolic size, the figures at a few values of it come first."""
from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QHBoxLayout, QPushButton, QScrollArea, QVBoxLayout, QWidget

from irviz.protocol.commands import State
from irviz.protocol.result_types import GenerationInfo
from irviz.ui import themes
from irviz.ui.panes.base import dim_label
from irviz.ui.result_stamp import ResultSlot, ResultStamp
from irviz.ui.widgets.memory_view import MemoryView, human_bytes


def by_length_text(plan: dict) -> str:
    """'activations at seq = 128: planned 2.0 MiB, peak 1.5 MiB · 512: …' for a plan with
    `by_length`, else ''."""
    by = plan.get("by_length") or {}
    rows = by.get("rows") or []
    if not rows:
        return ""
    fixed = ", ".join(f"{k} = {v}" for k, v in (by.get("fixed") or {}).items())
    parts = [f"{r['value']}: planned {human_bytes(r['planned_bytes'])}, peak {human_bytes(r['peak_bytes'])}"
             if "planned_bytes" in r else f"{r['value']}: {r.get('error', 'not planned')}" for r in rows]
    return (f"Activations by {by.get('dim')}" + (f" ({fixed})" if fixed else "") + " — "
            + " · ".join(parts) + f". Drawn below at {by.get('dim')} = {by.get('drawn')}.")


def kv_cache_text(gen: GenerationInfo | None) -> str:
    """'KV cache: 12.0 KiB, static (4 tensors of (1, 2, 24, 16) float32, 24 positions), … by context
    length — 1: 512 B · 2: 1.0 KiB · …' for a model open for generation, else ''."""
    if not gen:
        return ""
    shape = gen["kv_cache_shape"]
    # JSON objects may come back with their keys sorted as text ("16" before "2")
    by = sorted((gen.get("kv_cache_bytes_by_length") or {}).items(), key=lambda kv: int(kv[0]))
    rows = " · ".join(f"{n}: {human_bytes(b)}" for n, b in by)
    return (f"KV cache: {human_bytes(gen['kv_cache_bytes'])}, static ({shape['tensors']} tensors of "
            f"{tuple(shape['each'])} {shape['dtype']}, {gen['max_len']} positions), held whole all through "
            f"generation and read by both programs{_context_note(gen)}. Its filled part by context length — "
            f"{rows}. The activations below are the {gen['program']} program's alone.")


def _context_note(gen: GenerationInfo) -> str:
    context = gen.get("context_length")
    if context == "symbolic":
        return "; its length is symbolic in the programs (one build serves any max length)"
    if context is None:
        return ""
    return f"; its length is the constant {context} in the programs ({gen.get('context_reason') or 'as captured'})"


class MemoryTab(QWidget):
    """`ask(purpose, cmd, **args)` sends to the engine (the pane's ask); replies come back through
    `show` / `show_error`."""

    def __init__(self, ask, hub, cursor, parent=None, state: Callable[[], State | None] = lambda: None):
        super().__init__(parent)
        self._ask, self._cursor, self._state = ask, cursor, state
        self.button = QPushButton("Plan memory of this step")
        self.button.setToolTip("StaticPlanBlockMemory's storage tokens and tensor lifetimes "
                               "(a step before it is planned on a copy)")
        self.button.clicked.connect(self.plan)
        self.status = dim_label("")
        self.status.setWordWrap(True)
        self.status.setObjectName("MemoryStatus")
        self.by_length = dim_label("")
        self.by_length.setWordWrap(True)
        self.by_length.setObjectName("MemoryByLength")
        self.kv = dim_label("")
        self.kv.setWordWrap(True)
        self.kv.setObjectName("MemoryKvCache")
        self.kv.setVisible(False)
        self.note = dim_label("")
        self.view = MemoryView()
        self.view.tensorSelected.connect(hub.select_relax)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.view)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 4, 0, 0)
        row = QHBoxLayout()
        row.addWidget(self.button)
        row.addWidget(self.status, 1)
        lay.addLayout(row)
        lay.addWidget(self.kv)
        lay.addWidget(self.by_length)
        lay.addWidget(self.note)
        lay.addWidget(scroll, 1)
        self.slot = ResultSlot([self.view, self.by_length], self.note)

    def show_kv(self, state: State) -> None:
        """The static KV cache of a causal LM open for generation, beside the step's activations."""
        text = kv_cache_text(state.get("generation"))
        self.kv.setText(text)
        self.kv.setVisible(bool(text))

    def plan(self) -> None:
        cursor = self._cursor()
        if cursor is None:
            return
        self.status.setText(f"Planning step {cursor}…")
        self.status.setStyleSheet("")
        self.status.setToolTip("")
        self.slot.set(ResultStamp.of(self._state(), cursor))
        self._ask("memory", "memory", step=cursor)

    def clear(self) -> None:
        self.slot.clear()
        self.view.set_plan(None)
        self.status.setText("")
        self.by_length.setText("")

    def show_result(self, result: dict | None) -> None:
        self.status.setText("")
        self.by_length.setText(by_length_text(result or {}))
        self.view.set_plan(result)

    def show_error(self, error: dict) -> None:
        msg = error.get("message") or "failed"
        if error.get("hint"):
            msg += f"\nhint: {error['hint']}"
        self.status.setText(f"Memory planning failed: {msg}")
        self.status.setStyleSheet(f"color: {themes.colors().bad};")
        self.status.setToolTip(error.get("detail") or "")
        self.by_length.setText("")
        self.view.set_plan(None)
