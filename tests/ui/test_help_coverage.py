"""F1 help names every pane, tab, button and menu command the window has: a control the help does
not mention is one a user has to guess at."""
from __future__ import annotations

import html
import re

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QAbstractButton, QTabWidget

from irviz.ui.help import help_html


def _plain(text: str) -> str:
    """A control's text as a reader sees it: no mnemonic '&', no trailing '…', one space."""
    return _normal(text.replace("&&", "\0").replace("&", "").replace("\0", "&"))


def _normal(text: str) -> str:
    # arrows and the menu mark decorate a name; the help names the control without them
    text = re.sub(r"[…▾▲▼◀▶↑↓]|\.\.\.", "", text)
    return re.sub(r"\s+", " ", text).strip()


def controls(win) -> set[str]:
    """The texts of the window's buttons, check boxes, tabs and menu commands."""
    names = set()
    for b in win.findChildren(QAbstractButton):
        if b.text():
            names.add(_plain(b.text()))
    for tabs in win.findChildren(QTabWidget):
        names.update(_plain(tabs.tabText(i)) for i in range(tabs.count()))
    for menu_action in win.menuBar().actions():
        menu = menu_action.menu()
        for a in (menu.actions() if menu else []):
            if isinstance(a, QAction) and a.text() and not a.isSeparator() and a.menu() is None:
                names.add(_plain(a.text()))
    # symbols and one-letter arrows are not names to explain (◀ ▶, +, −)
    return {n for n in names if len(n) > 2 and re.search(r"[A-Za-z]{3}", n)}


def test_help_mentions_every_control(win):
    text = _normal(html.unescape(re.sub(r"<[^>]+>", " ", help_html(win)))).lower()
    names = controls(win)
    assert len(names) > 20  # the scan sees the window's controls
    missing = sorted(n for n in names if n.lower() not in text)
    assert missing == []


def test_the_scan_reads_mnemonics_and_ellipses():
    assert _plain("&Write repro folder…") == "Write repro folder"
    assert _plain("Run to end ▶▶") == "Run to end" and _plain("&Build && Run") == "Build & Run"
