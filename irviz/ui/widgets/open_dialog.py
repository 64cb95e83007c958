"""The Open dialog: a file chooser with the import options that must be chosen before opening
(they decide what the import produces): "Weights as inputs" (`--keep-params`)."""
from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QFileDialog, QGridLayout

KEEP_PARAMS_TEXT = "Weights as inputs (--keep-params): main(x, weights…), bound later by BindParams"


class OpenModelDialog(QFileDialog):
    """Qt's own (non-native) file dialog, so the options can sit under the file list."""

    def __init__(self, parent=None, start: str = "", name_filter: str = "", keep_params: bool = False):
        super().__init__(parent, "Open model", start, name_filter)
        self.setOption(QFileDialog.Option.DontUseNativeDialog, True)
        self.setFileMode(QFileDialog.FileMode.ExistingFile)
        self.keep_params_box = QCheckBox(KEEP_PARAMS_TEXT)
        self.keep_params_box.setToolTip(
            "Import with the weights kept as parameters of main and written to a .npz file; "
            "add BindParams to the pipeline to bind them in a step of its own")
        self.keep_params_box.setChecked(bool(keep_params))
        lay = self.layout()
        if isinstance(lay, QGridLayout):
            lay.addWidget(self.keep_params_box, lay.rowCount(), 0, 1, lay.columnCount())
        elif lay is not None:
            lay.addWidget(self.keep_params_box)

    def choice(self) -> tuple[str | None, bool]:
        files = self.selectedFiles()
        return (files[0] if files else None), self.keep_params_box.isChecked()
