"""The pane table drives the window: its docks, the View menu, the F1 help page and the saved
layout list exactly its panes, and one more row shows up in all of them with no other edit."""
from __future__ import annotations

import re

import pytest
from fake_bridge import FakeBridge
from PySide6.QtWidgets import QLabel, QVBoxLayout

from irviz.ui import pane_table
from irviz.ui.help import help_html
from irviz.ui.main_window import MainWindow
from irviz.ui.pane_table import Dock, PaneRow
from irviz.ui.panes.base import Pane


def view_menu_titles(w) -> list[str]:
    """The View menu's entries above its first separator: one per dock."""
    menu = next(a.menu() for a in w.menuBar().actions() if a.text() == "&View")
    titles = []
    for act in menu.actions():
        if act.isSeparator():
            break
        titles.append(act.text())
    return titles


def saved_dock_keys(w) -> set[str]:
    """The pane keys named in the layout the window saves (QMainWindow.saveState writes each dock's
    objectName as UTF-16)."""
    w.save_settings()
    raw = bytes(w.settings.value("window/state"))
    text = " ".join(m.decode("utf-16-be") for m in re.findall(rb"(?:\x00[\x20-\x7e])+", raw))
    return set(re.findall(r"dock_([a-z_]+)", text))


def help_titles() -> list[str]:
    return re.findall(r"<p><b>([^<]*)</b> — ", help_html())


def test_menu_help_and_layout_list_exactly_the_tables_panes(qtbot, win):
    rows = pane_table.rows()
    titles = [r.title for r in rows]
    assert [r.key for r in rows] == ["fx", "relax", "tir", "pipeline", "diff", "run"]
    assert view_menu_titles(win) == titles
    assert help_titles() == titles
    assert saved_dock_keys(win) == {r.key for r in rows}
    assert [win.docks[r.key].windowTitle() for r in rows] == titles
    assert win.panes == [getattr(win, r.key) for r in rows]
    assert all(isinstance(getattr(win, r.key), r.cls) for r in rows)


class NotesPane(Pane):
    """A test-only pane: says which step is shown, remembers a word in the settings."""

    def __init__(self, bridge, hub, parent=None, settings=None):
        super().__init__(bridge, hub, parent, settings=settings)
        self.info = QLabel("No model open")
        self.word = ""
        QVBoxLayout(self).addWidget(self.info)

    def on_state(self, state, prev):
        self.info.setText(f"step {state.get('cursor')}" if state.get("model") else "No model open")

    def on_reply(self, purpose, result):
        pass

    def restore_settings(self, settings):
        self.word = str(settings.value("notes/word", ""))

    def save_settings(self, settings):
        settings.setValue("notes/word", self.word)


def test_one_more_row_shows_up_in_the_window_menu_help_and_layout(qtbot, settings, monkeypatch):
    row = PaneRow("notes", NotesPane, "Notes", "Notes about the current step.", Dock(6, "below", "run"))
    monkeypatch.setattr(pane_table, "PANES", pane_table.PANES + [row])
    w = MainWindow(bridge=FakeBridge(), settings=settings)
    qtbot.addWidget(w)
    w.show()
    assert isinstance(w.notes, NotesPane) and w.notes in w.panes
    assert w.docks["notes"].widget() is w.notes
    assert view_menu_titles(w)[-1] == "Notes"
    assert help_titles()[-1] == "Notes" and "Notes about the current step." in help_html()
    assert "notes" in saved_dock_keys(w)
    w.open_spec("sample:mlp")
    qtbot.waitUntil(lambda: w.notes.info.text() == "step 0", timeout=5000)
    # its own settings and its dock's visibility come back in the next window
    w.notes.word = "hello"
    w.docks["notes"].hide()
    w.close()
    w2 = MainWindow(bridge=FakeBridge(), settings=settings)
    qtbot.addWidget(w2)
    w2.show()
    assert w2.notes.word == "hello" and not w2.docks["notes"].isVisible()
    w2.close()


def test_a_row_must_dock_beside_a_pane_placed_before_it(monkeypatch):
    row = PaneRow("notes", NotesPane, "Notes", "", Dock(6, "below", "nowhere"))
    monkeypatch.setattr(pane_table, "PANES", pane_table.PANES + [row])
    with pytest.raises(ValueError, match="nowhere"):
        pane_table.rows()
    monkeypatch.setattr(pane_table, "PANES", pane_table.PANES + [pane_table.PANES[0]])
    with pytest.raises(ValueError, match="unique"):
        pane_table.rows()


def test_a_pane_without_its_hooks_says_which_it_lacks(qtbot):
    from irviz.ui.events import EventHub

    class Bare(Pane):
        pass

    p = Bare(FakeBridge(), EventHub())
    qtbot.addWidget(p)
    with pytest.raises(NotImplementedError, match="Bare must implement on_state"):
        p.on_state({}, {})
    with pytest.raises(NotImplementedError, match="on_reply"):
        p.on_reply("x", None)
