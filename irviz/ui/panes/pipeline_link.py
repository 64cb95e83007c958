"""What a part of the Pipeline pane (target box, planned passes, code totals, bisect actions) may
use of the pane: read its state and steps, send a request as the pane, write its info line. The
parts get this and nothing else of the pane; what they change, they say with signals."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtWidgets import QLabel

from irviz.protocol.commands import Invocation, State, StepEntry


@dataclass
class PaneLink:
    state: Callable[[], State | None]      # the last state the pane took (None after a reset)
    steps: Callable[[], list[StepEntry]]   # the applied steps the pane shows
    planned: Callable[[], list[Invocation]]  # the passes planned after the cursor
    ask: Callable[..., int]                # Pane.ask: the reply comes back to the pane's on_reply
    waiting: Callable[[str], bool]         # Pane.waiting
    request: Callable[..., int]            # the bridge's request (no purpose: the state answers)
    info: QLabel                           # the pane's status line

    def cursor(self) -> int | None:
        state = self.state()
        return int(state.get("cursor", 0)) if state and state.get("model") else None
