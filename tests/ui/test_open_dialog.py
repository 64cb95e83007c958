"""File ▸ Open…: capture and importer choices, course map files, the combinations the engine
refuses are refused here too, and the window sends exactly what was chosen."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

from fake_bridge import FakeBridge
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QDialogButtonBox

from irviz.ui.open_dialog import OpenDialog


class RecordingBridge(FakeBridge):
    """The shared fake engine, but it never answers: the test reads exactly what was sent."""
    converter_files: list = []

    def request(self, cmd, supersede=None, **args):
        self.sent.append((cmd, args))
        return len(self.sent)


def _open_enabled(dlg):
    return dlg.buttons.button(QDialogButtonBox.StandardButton.Open).isEnabled()


def test_choices_and_refused_combinations(qtbot, tmp_path):
    dlg = OpenDialog(path=str(tmp_path / "model.py"))
    qtbot.addWidget(dlg)
    assert dlg.choice() == {"spec": str(tmp_path / "model.py"), "capture": None, "importer": None,
                            "importer_maps": [], "keep_params": False, "no_weights": False}
    assert _open_enabled(dlg)
    dlg.no_weights.setChecked(True)  # structure only: TVM's importer reads the weights' types only
    dlg.importer.setCurrentIndex(dlg.importer.findData("course"))
    assert not _open_enabled(dlg) and "Structure only" in dlg.note.text()
    dlg.importer.setCurrentIndex(dlg.importer.findData(None))
    assert _open_enabled(dlg) and dlg.choice()["no_weights"] is True
    dlg.no_weights.setChecked(False)

    dlg.capture.setCurrentIndex(dlg.capture.findData("symbolic_trace"))
    dlg.importer.setCurrentIndex(dlg.importer.findData("exported_program"))
    assert not _open_enabled(dlg) and "course importer" in dlg.note.text()
    dlg.importer.setCurrentIndex(dlg.importer.findData("course"))
    assert _open_enabled(dlg)

    dlg.capture.setCurrentIndex(dlg.capture.findData("export"))
    dlg.add_map(str(tmp_path / "a_map.py"))
    assert not _open_enabled(dlg) and "symbolic_trace" in dlg.note.text()
    dlg.capture.setCurrentIndex(dlg.capture.findData(None))  # Auto: a map file implies symbolic_trace
    dlg.add_map(str(tmp_path / "b_map.py"))
    dlg.add_map(str(tmp_path / "a_map.py"))  # loaded again: it wins, so it moves last
    assert _open_enabled(dlg)
    assert dlg.choice()["importer_maps"] == [str(tmp_path / "b_map.py"), str(tmp_path / "a_map.py")]
    dlg.resize(640, dlg.sizeHint().height())
    dlg.show()
    qtbot.waitExposed(dlg)
    dlg.grab().save(os.environ.get("IRVIZ_SHOT_DIR", str(tmp_path)) + "/open_dialog.png")
    dlg.clear_maps()
    assert dlg.map_files() == []

    dlg.path.setText("")
    assert not _open_enabled(dlg)


def test_window_sends_only_what_was_chosen(qtbot, tmp_path):
    from irviz.ui.main_window import MainWindow

    bridge = RecordingBridge()
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    win = MainWindow(bridge=bridge, settings=settings)
    qtbot.addWidget(win)
    win.open_spec("m.py")
    assert bridge.sent[-1] == ("open", {"spec": "m.py", "pipeline": "zero"})
    win.open_spec("m.py", capture="symbolic_trace", importer="course", importer_maps=["map.py"])
    assert bridge.sent[-1] == ("open", {"spec": "m.py", "pipeline": "zero", "capture": "symbolic_trace",
                                        "importer": "course", "importer_maps": ["map.py"]})


def test_bridge_recipe_keeps_capture_and_maps_for_replay():
    from irviz.protocol.commands import make_state
    from irviz.ui.bridge import EngineBridge

    bridge = EngineBridge(autostart=False, spare=False)
    steps = [{"index": 0, "pass": "import", "params": {}}]
    bridge._take_state(make_state(spec="m.py", importer="course", steps=steps, capture="symbolic_trace",
                                  importer_maps=["/x/map.py"]))
    assert bridge.recipe["capture"] == "symbolic_trace" and bridge.recipe["importer_maps"] == ["/x/map.py"]
    bridge._take_state(make_state(spec="m.py", importer="exported_program", steps=steps, capture="export"))
    assert bridge.recipe["capture"] == "export" and "importer_maps" not in bridge.recipe
