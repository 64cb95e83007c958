"""The first window fits the screen it opens on, and a window saved on a bigger screen comes back
no larger than this one."""
from __future__ import annotations

from fake_bridge import FakeBridge
from PySide6.QtCore import QRect

from irviz.ui import main_window
from irviz.ui.main_window import FRAME_MARGIN, MainWindow, fit_to


def test_fit_to_keeps_room_for_the_frame():
    assert fit_to(1600, 1000, QRect(0, 0, 1920, 1080)) == (1600, 1000)
    assert fit_to(1600, 1000, QRect(0, 0, 1600, 1000)) == (1600 - FRAME_MARGIN[0], 1000 - FRAME_MARGIN[1])
    assert fit_to(1600, 1000, None) == (1600, 1000)


def _window(qtbot, settings, monkeypatch, screen: QRect) -> MainWindow:
    monkeypatch.setattr(main_window, "available_geometry", lambda _w: screen)
    w = MainWindow(bridge=FakeBridge(), settings=settings)
    qtbot.addWidget(w)
    return w


def test_first_window_fits_a_1000px_screen(qtbot, settings, monkeypatch):
    screen = QRect(0, 0, 1600, 1000)
    w = _window(qtbot, settings, monkeypatch, screen)
    # its status bar must be on the screen: the client area plus a title bar fits
    assert w.height() + FRAME_MARGIN[1] <= screen.height()
    assert w.width() + FRAME_MARGIN[0] <= screen.width()


def test_a_window_saved_larger_comes_back_within_the_screen(qtbot, settings, monkeypatch):
    w = _window(qtbot, settings, monkeypatch, QRect(0, 0, 2560, 1440))
    w.resize(2400, 1350)
    w.save_settings()
    w.close()
    small = QRect(0, 0, 1600, 1000)
    w2 = _window(qtbot, settings, monkeypatch, small)
    assert w2.height() + FRAME_MARGIN[1] <= small.height()
    assert w2.width() + FRAME_MARGIN[0] <= small.width()
