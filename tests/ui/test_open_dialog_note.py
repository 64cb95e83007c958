"""The Open dialog says that opening a .py file runs its code."""
from __future__ import annotations

import os

from PySide6.QtWidgets import QLabel

from fake_bridge import FakeBridge


def test_open_dialog_warns_that_python_files_run(qtbot, settings, tmp_path):
    from irviz.ui.main_window import MainWindow
    from irviz.ui.open_dialog import OpenDialog

    w = MainWindow(bridge=FakeBridge(), settings=settings)
    qtbot.addWidget(w)
    dialog = OpenDialog(w, start_dir=str(tmp_path))
    qtbot.addWidget(dialog)
    dialog.resize(820, 480)
    dialog.show()
    qtbot.waitExposed(dialog)
    note = dialog.findChild(QLabel, "untrusted_note")
    assert note is not None and note.isVisible()
    assert "runs its code" in note.text() and ".pt2" in note.text()
    assert dialog.windowTitle() == "Open model"
    shot = os.environ.get("IRVIZ_SHOTS")
    if shot:
        dialog.grab().save(os.path.join(shot, "open_dialog.png"))
    dialog.reject()
