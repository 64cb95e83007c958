"""A QToolButton with its text (and checkable state) set: PySide6 takes Qt properties as keyword
arguments (`QToolButton(text=...)`), but its type stubs do not declare them."""
from __future__ import annotations

from PySide6.QtWidgets import QToolButton


def tool_button(text: str, checkable: bool = False, checked: bool = False) -> QToolButton:
    button = QToolButton()
    button.setText(text)
    button.setCheckable(checkable)
    button.setChecked(checked)
    return button
