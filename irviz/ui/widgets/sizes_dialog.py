"""A small dialog asking for the values of symbolic sizes (m, n, k) when a Relax function runs on
made-up inputs: one field per size, in the order the function's parameters use them."""
from __future__ import annotations

from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QFormLayout, QLabel, QSpinBox,
                               QVBoxLayout)

MAX_SIZE = 1 << 20   # a made-up input this large is already more than a desktop wants to run


class SizesDialog(QDialog):
    def __init__(self, names: list[str], values: dict | None = None, func: str = "main",
                 model: str = "", parent=None):
        super().__init__(parent)
        self.setWindowTitle("Sizes for the inputs")
        self.setObjectName("SizesDialog")
        values = values or {}
        where = f" of {model}" if model else ""
        intro = QLabel(f"<b>{func}</b>{where} has symbolic sizes. The file has no get_inputs(), so "
                       "irviz makes random inputs: give each size a value. They are remembered for "
                       "this file.")
        intro.setWordWrap(True)
        self.fields: dict[str, QSpinBox] = {}
        form = QFormLayout()
        for name in names:
            box = QSpinBox()
            box.setRange(1, MAX_SIZE)
            box.setValue(int(values.get(name, 1)))
            box.setObjectName(f"size_{name}")
            form.addRow(name, box)
            self.fields[name] = box
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Build && Run")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.buttons = buttons
        lay = QVBoxLayout(self)
        lay.addWidget(intro)
        lay.addLayout(form)
        lay.addWidget(buttons)
        self.setMinimumWidth(360)
        if names:
            self.fields[names[0]].setFocus()
            self.fields[names[0]].selectAll()

    def values(self) -> dict[str, int]:
        return {name: int(box.value()) for name, box in self.fields.items()}


def ask_sizes(names: list[str], values: dict | None = None, func: str = "main", model: str = "",
              parent=None) -> dict[str, int] | None:
    """The sizes the user gave, or None when they cancelled."""
    dlg = SizesDialog(names, values, func, model, parent)
    return dlg.values() if dlg.exec() == QDialog.DialogCode.Accepted else None
