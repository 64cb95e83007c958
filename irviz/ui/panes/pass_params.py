"""The parameters of one planned pass as a form (in the Pipeline pane): an editor per parameter, of its kind (bool,
int, choice, JSON, text), each edit handed back as (name, value)."""
from __future__ import annotations

import json
from collections.abc import Callable

from PySide6.QtWidgets import QCheckBox, QComboBox, QFormLayout, QGroupBox, QLineEdit, QSpinBox, QWidget

from irviz.protocol.commands import Invocation
from irviz.ui.panes.base import dim_label


def params_text(params: dict | None) -> str:
    """{"opt_level": 3} -> "opt_level=3", for a one-line list of planned passes."""
    if not params:
        return ""
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


class PassParamsBox(QGroupBox):
    def __init__(self, on_invalid: Callable[[str], None], parent=None):
        super().__init__("Parameters", parent)
        self.on_invalid = on_invalid        # told why an edit was not taken (bad JSON)
        self.form = QFormLayout(self)
        self.form.setContentsMargins(6, 4, 6, 4)
        self.setVisible(False)

    def show_pass(self, inv: Invocation | None, spec: dict, on_change: Callable[[str, object], None]) -> None:
        """Edit invocation `inv` ({name, params}) of the pass described by `spec` (its catalogue
        entry); None hides the box."""
        while self.form.rowCount():
            self.form.removeRow(0)
        if inv is None:
            self.setVisible(False)
            return
        params = spec.get("params") or []
        self.setTitle(f"{inv.get('name')} parameters")
        self.setToolTip(spec.get("description", ""))
        if not params:
            self.form.addRow(dim_label("This pass has no parameters."))
        for p in params:
            value = (inv.get("params") or {}).get(p["name"], p.get("default"))
            w = self._editor(p, value, on_change)
            w.setToolTip(p.get("help", ""))
            self.form.addRow(p["name"], w)
        self.setVisible(True)

    def _editor(self, p: dict, value, on_change: Callable[[str, object], None]) -> QWidget:
        kind = p.get("kind")
        name = p["name"]
        if kind == "bool":
            check = QCheckBox()
            check.setChecked(bool(value))
            check.toggled.connect(lambda v: on_change(name, bool(v)))
            return check
        if kind == "int":
            spin = QSpinBox()
            spin.setRange(-1_000_000, 1_000_000)
            spin.setValue(int(value or 0))
            spin.editingFinished.connect(lambda: on_change(name, spin.value()))
            return spin
        if kind == "choice" and p.get("choices"):
            combo = QComboBox()
            for ch in p["choices"]:
                combo.addItem(str(ch), ch)
            combo.setCurrentIndex(max(0, combo.findData(value)))
            combo.activated.connect(lambda i: on_change(name, combo.itemData(i)))
            return combo
        w = QLineEdit(json.dumps(value) if kind == "json" else ("" if value is None else str(value)))

        def done():
            text = w.text()
            if kind == "json":
                try:
                    v = json.loads(text or "null")
                except ValueError:
                    self.on_invalid(f"{name}: not valid JSON")
                    return
            else:
                v = text
            on_change(name, v)
        w.editingFinished.connect(done)
        return w
