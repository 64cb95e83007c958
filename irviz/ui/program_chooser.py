"""The toolbar's program bar: for a causal LM opened for generation, the chooser between its two
programs, prefill (the prompt, filling the KV cache) and decode (one token over the cache).

Shown only while a model is open for generation. Choosing a program asks the engine to
`choose_program`; the panes start afresh from the state it answers with, as after choosing a graph
of graph breaks. Each program keeps its own steps and cursor in the engine."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from irviz.protocol.commands import State
from irviz.protocol.result_types import GenerationInfo

PROGRAMS = ("prefill", "decode")
WHAT = {"prefill": "the prompt, filling the KV cache", "decode": "one token, reading and writing the KV cache"}


def program_item_text(name: str, info: dict) -> str:
    """'decode · 310 FX nodes · step 5 · main(input_ids, position, ..., <12 weights>)'."""
    return (f"{name} · {info.get('fx_nodes', '?')} FX nodes · step {info.get('cursor', 0)}"
            f" · {info.get('signature', '')}")


class ProgramBar(QWidget):
    programChosen = Signal(str)  # the user picked the other program

    def __init__(self, parent=None):
        super().__init__(parent)
        self.label = QLabel("Generation:")
        self.label.setObjectName("programLabel")
        self.combo = QComboBox()
        self.combo.setObjectName("programChooser")
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.combo.setToolTip("The program the panes show: prefill runs once on the prompt and fills "
                              "the KV cache; decode runs once per generated token over the cache. "
                              "Each steps through its passes on its own; both share the weights.")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 0, 4, 0)
        lay.addWidget(self.label)
        lay.addWidget(self.combo)
        self._shown: str | None = None
        self.combo.activated.connect(self._on_activated)
        self.set_state(None)

    def set_state(self, state: State | None) -> None:
        gen: GenerationInfo | None = state.get("generation") if state else None
        # a toolbar shows or hides its widgets through their actions: the bar stays, its parts go
        self.label.setVisible(bool(gen))
        self.combo.setVisible(bool(gen))
        if not gen:
            self._shown = None
            return
        self.combo.blockSignals(True)
        self.combo.clear()
        for name in PROGRAMS:
            self.combo.addItem(program_item_text(name, dict(gen["programs"].get(name) or {})), name)
            self.combo.setItemData(self.combo.count() - 1, WHAT[name], Qt.ItemDataRole.ToolTipRole)
        self._shown = gen["program"]
        self.combo.setCurrentIndex(max(0, self.combo.findData(self._shown)))
        self.combo.blockSignals(False)
        cache = gen["kv_cache_shape"]
        self.label.setToolTip(f"static KV cache: {cache['tensors']} tensors of {tuple(cache['each'])} "
                              f"{cache['dtype']}, {gen['max_len']} positions, prompt {gen['prompt_len']}; context length "
                              f"{gen.get('context_length', '?')} in the programs")

    def choose(self, program: str) -> None:
        """Select `program` as the user would (tests and scripts)."""
        i = self.combo.findData(program)
        if i >= 0:
            self.combo.setCurrentIndex(i)
            self._on_activated(i)

    def revert(self) -> None:
        """Back to the program that is open (a choice the engine refused)."""
        if self._shown is not None:
            self.combo.blockSignals(True)
            self.combo.setCurrentIndex(max(0, self.combo.findData(self._shown)))
            self.combo.blockSignals(False)

    def _on_activated(self, index: int) -> None:
        program = self.combo.itemData(index)
        if program is not None and program != self._shown:
            self.programChosen.emit(str(program))
