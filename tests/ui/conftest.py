"""Qt tests run offscreen; the platform must be chosen before Qt is imported."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


import pytest  # noqa: E402


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
