"""The Pipeline pane's Target box: the named targets this machine can build for (the engine's
`list_targets`), or a TVM target typed as JSON. Choosing one runs the applied passes again under
it, as choosing a pipeline does, and builds are for it; a bad target leaves everything as it was."""
from __future__ import annotations

import html
import json

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox

from irviz.ui.panes.kernel_code_tab import fill_target_box

HOST = "host"


class TargetChoice:
    """Mixed into PipelinePane (uses its bridge, state, info line and ask)."""

    def _target_box(self) -> QComboBox:
        self.targets: list[dict] = []
        box = QComboBox()
        box.setEditable(True)
        box.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        box.addItem(HOST)
        box.setMinimumContentsLength(10)
        box.setToolTip("Target the passes run under and builds are for: a name (with -key=value "
                       'options, e.g. cuda -arch=sm_86) or a TVM target as JSON, e.g. {"kind": '
                       '"llvm", "mcpu": "znver3"}; Enter applies a typed one')
        box.textActivated.connect(self.choose_target)
        # Enter on a typed target no item matches activates nothing: the line edit says it
        box.lineEdit().returnPressed.connect(lambda: self.choose_target(box.currentText()))
        self._asked_target: str | None = None
        self.target_box = box
        return box

    def _fill_targets(self, targets: list[dict]) -> None:
        """The catalogue's targets this wheel and machine can build for, each with its dict."""
        self.targets = [t for t in targets or [] if not t.get("unavailable")]
        box = self.target_box
        box.blockSignals(True)
        box.clear()
        for t in self.targets:
            box.addItem(t["name"])
            box.setItemData(box.count() - 1, f"{t.get('description', '')}\n{json.dumps(t.get('target'))}",
                            Qt.ItemDataRole.ToolTipRole)
        box.blockSignals(False)
        code = getattr(self, "code_target", None)  # Count code compiles for one of the same
        if code is not None:
            fill_target_box(code, targets)
        self._show_target(self.state)

    def chosen_target(self) -> str:
        return (self.state or {}).get("target") or HOST

    def choose_target(self, text: str) -> int | None:
        """Ask the engine to run the passes under `text`; None when it is the target already."""
        text = (text or "").strip() or HOST
        if text == self.chosen_target():
            self._show_target(self.state)
            return None
        if text == self._asked_target and self.waiting("target"):
            return None  # Enter on a listed name activates it as well
        self._asked_target = text
        self.info.setText(f"Target {text}: applying the passes again under it…")
        return self.ask("target", "set_target", target=text)

    def _show_target(self, state: dict | None) -> None:
        name = (state or {}).get("target") or HOST
        code = getattr(self, "code_target", None)  # Count code's target follows, unless chosen apart
        if code is not None and code.currentText().strip() in ("", getattr(self, "_shown_target", HOST)):
            code.setEditText(name)
        self._shown_target = name
        box = self.target_box
        box.blockSignals(True)
        at = box.findText(name)
        if at >= 0:
            box.setCurrentIndex(at)
        box.setEditText(name)
        box.blockSignals(False)
        spec = next((t.get("target") for t in self.targets if t.get("name") == name), None)
        box.lineEdit().setToolTip(f"{name}: {json.dumps(spec)}" if spec else name)

    def on_target_error(self, error: dict) -> str:
        """A bad target: say why, with the targets available here, and show the one still in use."""
        message = error.get("message", "failed")
        full = message + (f"\nhint: {error['hint']}" if error.get("hint") else "")
        self.info.setToolTip(f"<pre>{html.escape(full)}</pre>")
        self._show_target(self.state)
        return f"Target still {self.chosen_target()}: {message.splitlines()[0]}"
