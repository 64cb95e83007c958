"""Opening a causal LM for generation, and switching between its prefill and decode programs.

The window's part for it: File ▸ Open for generation… (and `irviz MODEL --generate`) asks the
engine to `generate_open`; the toolbar's ProgramBar chooses the program the panes show
(`choose_program`). Like choosing a graph of graph breaks, both give a new model to the panes: the
window's state is emptied and sessionReset emitted before the engine's state arrives, so nothing
shown of the other program is taken for this one's."""
from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (QCheckBox, QDialog, QDialogButtonBox, QFormLayout, QLineEdit, QSpinBox,
                               QWidget)

from irviz.protocol.commands import State, empty_state
from irviz.ui.panes.generate_tab import GenerateTab
from irviz.ui.program_chooser import ProgramBar
from irviz.ui.result_stamp import ResultStamp

if TYPE_CHECKING:
    from irviz.ui.main_window import MainWindow

DEFAULT_SPEC = "sample:hf_llama"


class GenerateOpenDialog(QDialog):
    """The model (a file whose get_model() returns a transformers causal LM and prompt ids, or a
    sample), the pipeline both programs plan, the tokens to generate and the cache's length."""

    def __init__(self, parent: QWidget | None = None, spec: str = DEFAULT_SPEC):
        super().__init__(parent)
        self.setWindowTitle("Open for generation")
        self.spec = QLineEdit(spec)
        self.spec.setToolTip("FILE.py whose get_model() returns a causal LM and prompt ids (1, S), "
                             "FILE.py:NAME, or sample:NAME")
        self.pipeline = QLineEdit("zero")
        self.tokens = QSpinBox()
        self.tokens.setRange(1, 4096)
        self.tokens.setValue(16)
        self.max_len = QSpinBox()
        self.max_len.setRange(0, 1 << 20)
        self.max_len.setSpecialValueText("prompt + tokens")
        self.max_len.setToolTip("Positions in the static KV cache")
        self.no_weights = QCheckBox("Structure only (no weights): graphs, passes and the cache's bytes")
        form = QFormLayout(self)
        form.addRow("Model", self.spec)
        form.addRow("Pipeline", self.pipeline)
        form.addRow("Tokens", self.tokens)
        form.addRow("Cache length", self.max_len)
        form.addRow(self.no_weights)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Open | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def choice(self) -> dict:
        return {"spec": self.spec.text().strip(), "pipeline": self.pipeline.text().strip() or "zero",
                "tokens": self.tokens.value(), "max_len": self.max_len.value() or None,
                "no_weights": self.no_weights.isChecked()}


class GenerationOpening(QObject):
    """The window's generation actions; its requests are its own (purposes below), their replies
    and failures handled here."""

    def __init__(self, window: MainWindow):
        super().__init__(window)
        self._w = window
        self._own: dict[int, str] = {}
        self.bar = ProgramBar(window)
        self.bar.programChosen.connect(self.choose_program)
        self.act_open = QAction("Open for &generation…", window)
        self.act_open.setToolTip("Open a causal LM as its prefill and decode programs over a static KV "
                                 "cache, to step both and generate tokens (Run ▸ Generate)")
        self.act_open.triggered.connect(self.open_dialog)
        window.bridge.replied.connect(self._on_replied)
        window.bridge.failed.connect(self._on_failed)
        self.tab = GenerateTab(window.bridge)  # the Run pane's Generate tab
        window.run.tabs.addTab(self.tab, "Generate")
        self._prev: State | None = None
        self._pending_bisect: dict | None = None  # a bisect to show once its program is shown
        self.tab.step_bisect.bisected.connect(self.show_step_bisect)
        window.bridge.stateChanged.connect(self._on_state)

    def _on_state(self, state: State) -> None:
        state = state or empty_state()
        self.bar.set_state(state)
        self.tab.on_state(state, self._prev)
        self._w.run.memory.show_kv(state)
        self._prev = state
        pending, gen = self._pending_bisect, state.get("generation")
        if pending and gen and gen.get("program") == pending.get("program"):
            self._pending_bisect = None
            # after every pane has this state: the Pipeline pane stamps and jumps from its own
            QTimer.singleShot(0, lambda: self._show_in_pipeline(pending))

    def show_step_bisect(self, result: dict) -> None:
        """A generation step's bisect, shown as Find first bad pass shows its own: in its program
        (chosen first when the other one is shown), at the bad step, the first diverging binding
        selected."""
        program = result.get("program")
        gen = self._w.state.get("generation")
        if not gen or not program:
            return
        if gen.get("program") == program:
            self._show_in_pipeline(result)
            return
        self._pending_bisect = result
        self.choose_program(str(program))  # the bar follows the state it answers with

    def _show_in_pipeline(self, result: dict) -> None:
        actions = self._w.pipeline.bisect
        actions.bisect_stamp = ResultStamp.of(self._w.state)
        actions.show_bisect(result)
        first = (result.get("diverging") or {}).get("first")
        if first:
            self._w.hub.select_relax(str(first))

    def open_dialog(self) -> None:
        dlg = GenerateOpenDialog(self._w, str(self._w.settings.value("generate/spec", DEFAULT_SPEC)))
        self.dialog = dlg  # tests and screenshots reach the dialog through this
        if dlg.exec():
            choice = dlg.choice()
            self._w.settings.setValue("generate/spec", choice["spec"])
            self.open(**choice)

    def open(self, spec: str, pipeline: str = "zero", tokens: int = 16, max_len: int | None = None,
             no_weights: bool = False) -> int:
        """Open `spec` for generation in the engine: its prefill program shown first."""
        w = self._w
        w.hub.clear()
        w.status(f"Opening {spec} for generation…")
        for p in (w.fx, w.relax, w.tir, w.pipeline):
            p.show_loading(f"Opening {spec}: torch.export of its prefill and decode programs over a "
                           "static KV cache, and their import into Relax…")
        args = {"spec": str(spec), "pipeline": pipeline, "tokens": int(tokens), "no_weights": bool(no_weights)}
        if max_len:
            args["max_len"] = int(max_len)
        return self._ask("open", "generate_open", **args)

    def choose_program(self, program: str) -> int | None:
        """Show the other program of the causal LM open for generation."""
        if not self._w.state.get("generation"):
            return None
        self._w.status(f"Showing the {program} program…")
        return self._ask("program", "choose_program", program=str(program))

    def _ask(self, purpose: str, cmd: str, **args) -> int:
        rid = self._w.bridge.request(cmd, **args)
        self._own[rid] = purpose
        return rid

    def _on_replied(self, rid: int, cmd: str, result) -> None:
        purpose = self._own.pop(rid, None)
        if purpose is None:
            return
        w = self._w
        w.state = empty_state()
        w.hub.sessionReset.emit()  # before the bridge emits the new state

    def _on_failed(self, rid: int, cmd: str, error: dict) -> None:
        purpose = self._own.pop(rid, None)
        if purpose is None:
            return
        w = self._w
        error = error or {}
        msg = str(error.get("message") or "failed")
        hint = error.get("hint")
        if purpose == "program":
            self.bar.revert()
            self._pending_bisect = None
        else:
            for p in (w.fx, w.relax, w.tir, w.pipeline):  # undo "Opening…"
                p.refresh()
        w.last_error = error
        w.status(f"{error.get('stage', '?')}: {msg}" + (f" — {hint}" if hint else ""), error=True)
        w.notify("Could not open for generation" if purpose == "open" else "Program not changed",
                 msg + (f"\n\nHint: {hint}" if hint else ""))
