"""Light and dark themes: a QPalette for the Fusion style plus a few colours the views use."""
from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

THEMES = ("light", "dark")


@dataclass(frozen=True)
class Colors:
    name: str
    window: str
    base: str
    alt_base: str
    text: str
    dim_text: str
    button: str
    highlight: str
    highlight_text: str
    border: str
    # code view
    line_number_bg: str
    line_number_fg: str
    current_line: str
    highlight_line: str
    find_match: str
    # diff view
    diff_add_bg: str
    diff_add_fg_strong: str
    diff_del_bg: str
    diff_del_fg_strong: str
    diff_change_bg: str
    diff_filler: str
    diff_hunk_bg: str
    # status
    ok: str
    bad: str
    warn: str
    pygments_style: str


LIGHT = Colors(
    name="light", window="#f3f3f3", base="#ffffff", alt_base="#f7f7f9", text="#1f2328",
    dim_text="#6e7781", button="#f6f8fa", highlight="#2f6fde", highlight_text="#ffffff",
    border="#d0d7de", line_number_bg="#f6f8fa", line_number_fg="#8c959f",
    current_line="#eef4ff", highlight_line="#fff3b0", find_match="#ffd33d",
    diff_add_bg="#e6ffec", diff_add_fg_strong="#abf2bc", diff_del_bg="#ffebe9",
    diff_del_fg_strong="#ffb3ad", diff_change_bg="#fff8c5", diff_filler="#f0f0f0",
    diff_hunk_bg="#ddf4ff", ok="#1a7f37", bad="#cf222e", warn="#9a6700",
    pygments_style="default",
)

DARK = Colors(
    name="dark", window="#1e1f22", base="#16171a", alt_base="#202226", text="#d4d7dd",
    dim_text="#8b919a", button="#2b2d31", highlight="#3d74d9", highlight_text="#ffffff",
    border="#3a3d42", line_number_bg="#1b1c1f", line_number_fg="#5c6370",
    current_line="#23262c", highlight_line="#4d4420", find_match="#80630f",
    diff_add_bg="#1d3323", diff_add_fg_strong="#2e6b3c", diff_del_bg="#3d1f21",
    diff_del_fg_strong="#7a2f33", diff_change_bg="#3a3520", diff_filler="#222326",
    diff_hunk_bg="#1c3045", ok="#3fb950", bad="#f85149", warn="#d29922",
    pygments_style="monokai",
)

_CURRENT = LIGHT
_APPLIED: tuple | None = None


def colors() -> Colors:
    return _CURRENT


def palette_for(c: Colors) -> QPalette:
    p = QPalette()
    role = QPalette.ColorRole
    p.setColor(role.Window, QColor(c.window))
    p.setColor(role.WindowText, QColor(c.text))
    p.setColor(role.Base, QColor(c.base))
    p.setColor(role.AlternateBase, QColor(c.alt_base))
    p.setColor(role.ToolTipBase, QColor(c.base))
    p.setColor(role.ToolTipText, QColor(c.text))
    p.setColor(role.Text, QColor(c.text))
    p.setColor(role.PlaceholderText, QColor(c.dim_text))
    p.setColor(role.Button, QColor(c.button))
    p.setColor(role.ButtonText, QColor(c.text))
    p.setColor(role.BrightText, QColor(c.bad))
    p.setColor(role.Highlight, QColor(c.highlight))
    p.setColor(role.HighlightedText, QColor(c.highlight_text))
    p.setColor(role.Link, QColor(c.highlight))
    p.setColor(role.Mid, QColor(c.border))
    p.setColor(role.Dark, QColor(c.border))
    for r in (role.Text, role.WindowText, role.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, r, QColor(c.dim_text))
    return p


def stylesheet(c: Colors) -> str:
    return f"""
QDockWidget::title {{ padding: 4px 6px; background: {c.button}; border-bottom: 1px solid {c.border}; }}
QDockWidget {{ font-weight: 600; }}
QDockWidget > QWidget {{ font-weight: normal; }}
QToolBar {{ border: none; spacing: 2px; }}
QStatusBar {{ border-top: 1px solid {c.border}; }}
QTabBar::tab {{ padding: 3px 10px; }}
QHeaderView::section {{ padding: 2px 4px; }}
QLabel[role="dim"] {{ color: {c.dim_text}; }}
QLabel[role="title"] {{ font-weight: 600; }}
QFrame#Toast {{ background: {c.base}; border: 1px solid {c.bad}; border-radius: 6px; }}
QFrame#Toast[kind="info"] {{ border-color: {c.highlight}; }}
"""


def apply_theme(name: str, app: QApplication | None = None) -> Colors:
    """Switch the application to ``name`` ("light" or "dark"); returns its colours."""
    global _CURRENT, _APPLIED
    running = QApplication.instance()
    app = app or (running if isinstance(running, QApplication) else None)  # None: not a GUI yet
    c = DARK if name == "dark" else LIGHT
    _CURRENT = c
    if app is not None and _APPLIED != (id(app), c.name):  # restyling every widget is not free
        _APPLIED = (id(app), c.name)
        app.setStyle("Fusion")
        app.setPalette(palette_for(c))
        app.setStyleSheet(stylesheet(c))
    return c
