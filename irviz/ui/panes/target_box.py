"""The Pipeline pane's Target box: the named targets this machine can build for (the engine's
`list_targets`), or a TVM target typed as JSON. Choosing one runs the applied passes again under
it, as choosing a pipeline does, and builds are for it; a bad target leaves everything as it was."""
from __future__ import annotations

import html
import json

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox

from irviz.protocol.commands import State
from irviz.ui.panes.pipeline_link import PaneLink

HOST = "host"


class TargetBox(QComboBox):
    """A child of the Pipeline pane; the pane hands it the `targets` reply and its state."""

    listed = Signal(list)   # the engine's whole catalogue (Count code's box lists it too)
    shown = Signal(str)     # the target in use, shown anew

    def __init__(self, link: PaneLink, parent=None):
        super().__init__(parent)
        self._link = link
        self.targets: list[dict] = []
        self._asked_target: str | None = None
        self.setEditable(True)
        self.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.addItem(HOST)
        self.setMinimumContentsLength(10)
        self.setToolTip("Target the passes run under and builds are for: a name (with -key=value "
                        'options, e.g. cuda -arch=sm_86) or a TVM target as JSON, e.g. {"kind": '
                        '"llvm", "mcpu": "znver3"}; Enter applies a typed one')
        self.textActivated.connect(self.choose_target)
        # Enter on a typed target no item matches activates nothing: the line edit says it
        editor = self.lineEdit()
        assert editor is not None  # an editable combo box has its line edit
        editor.returnPressed.connect(lambda: self.choose_target(self.currentText()))

    def fill_targets(self, targets: list[dict]) -> None:
        """The catalogue's targets this wheel and machine can build for, each with its dict."""
        self.targets = [t for t in targets or [] if not t.get("unavailable")]
        self.blockSignals(True)
        self.clear()
        for t in self.targets:
            self.addItem(t["name"])
            self.setItemData(self.count() - 1, f"{t.get('description', '')}\n{json.dumps(t.get('target'))}",
                             Qt.ItemDataRole.ToolTipRole)
        self.blockSignals(False)
        self.listed.emit(list(targets or []))
        self.show_target(self._link.state())

    def chosen_target(self) -> str:
        state = self._link.state()
        return (state.get("target") if state else None) or HOST

    def choose_target(self, text: str) -> int | None:
        """Ask the engine to run the passes under `text`; None when it is the target already."""
        text = (text or "").strip() or HOST
        if text == self.chosen_target():
            self.show_target(self._link.state())
            return None
        if text == self._asked_target and self._link.waiting("target"):
            return None  # Enter on a listed name activates it as well
        self._asked_target = text
        self._link.info.setText(f"Target {text}: applying the passes again under it…")
        return self._link.ask("target", "set_target", target=text)

    def show_target(self, state: State | None) -> None:
        name = (state.get("target") if state else None) or HOST
        self.shown.emit(name)
        self.blockSignals(True)
        at = self.findText(name)
        if at >= 0:
            self.setCurrentIndex(at)
        self.setEditText(name)
        self.blockSignals(False)
        spec = next((t.get("target") for t in self.targets if t.get("name") == name), None)
        if (editor := self.lineEdit()) is not None:
            editor.setToolTip(f"{name}: {json.dumps(spec)}" if spec else name)

    def on_target_error(self, error: dict) -> str:
        """A bad target: say why, with the targets available here, and show the one still in use."""
        message = error.get("message", "failed")
        full = message + (f"\nhint: {error['hint']}" if error.get("hint") else "")
        self._link.info.setToolTip(f"<pre>{html.escape(full)}</pre>")
        self.show_target(self._link.state())
        return f"Target still {self.chosen_target()}: {message.splitlines()[0]}"
