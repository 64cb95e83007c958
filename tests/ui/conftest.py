"""Qt tests run offscreen; the platform must be chosen before Qt is imported."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


import pytest


@pytest.fixture
def settings(tmp_path):
    """A settings file of this test alone."""
    from PySide6.QtCore import QSettings

    yield QSettings(str(tmp_path / "irviz.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def win(qtbot, settings):
    """A shown MainWindow on the fake engine (tests/ui/fake_bridge.py)."""
    from fake_bridge import FakeBridge

    from irviz.ui.main_window import MainWindow

    w = MainWindow(bridge=FakeBridge(), settings=settings)
    qtbot.addWidget(w)
    w.resize(1600, 1000)
    w.show()
    yield w
    w.close()


@pytest.fixture(scope="module")
def real_window(tmp_path_factory):
    """A MainWindow with its own engine and settings file, shared by one test module."""
    from PySide6.QtCore import QSettings

    from irviz.ui.app import make_app
    from irviz.ui.main_window import MainWindow

    make_app()
    settings = QSettings(str(tmp_path_factory.mktemp("settings") / "irviz.ini"), QSettings.Format.IniFormat)
    w = MainWindow(settings=settings)
    w.resize(1600, 1000)
    w.show()
    yield w
    w.bridge.shutdown()
    w.close()
