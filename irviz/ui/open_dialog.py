"""File ▸ Open…: the file, how to capture it and which importer to use, and the course map files.

    dlg = OpenDialog(parent, path="model.py")
    if dlg.exec():
        window.open_spec(**dlg.choice())   # spec, capture, importer, importer_maps

"Auto" leaves the choice to the engine: the model file's IRVIZ_CAPTURE / IRVIZ_IMPORTER, else
torch.export + TVM's importer, or the course importer for a symbolic_trace graph. Pure Qt: the
engine checks the map files when it opens the model.
"""
from __future__ import annotations

import os

from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QDialogButtonBox, QFileDialog, QFormLayout,
                               QHBoxLayout, QLabel, QLineEdit, QListWidget, QPushButton,
                               QVBoxLayout, QWidget)

OPEN_FILTER = ("Models and steps (*.py *.pt2);;Python model file, IR file or exported TVMScript step (*.py);;"
               "Exported program (*.pt2);;All files (*)")
MAP_FILTER = "Course map files (*.py);;All files (*)"

CAPTURES = [("Auto (the file's IRVIZ_CAPTURE, else torch.export)", None),
            ("torch.export (aten graph)", "export"),
            ("torch.fx.symbolic_trace (module graph, as the course)", "symbolic_trace")]
IMPORTERS = [("Auto (course for symbolic_trace, else TVM's)", None),
             ("TVM exported_program importer", "exported_program"),
             ("Course importer (emit_te + TOPI)", "course")]


UNTRUSTED_NOTE = ("Opening a .py model or pass file runs its code, as torch.load of a pickle would: "
                  "open only files you trust. A .pt2 is loaded without running code it carries.")
KEEP_PARAMS_TEXT = "Weights as inputs (--keep-params): main(x, weights…), bound later by BindParams"
NO_WEIGHTS_TEXT = "Structure only (--no-weights): no weights allocated, no runs"


class OpenDialog(QDialog):
    def __init__(self, parent=None, path: str = "", start_dir: str = "", capture=None, importer=None,
                 importer_maps=(), keep_params: bool = False, no_weights: bool = False):
        super().__init__(parent)
        self.setWindowTitle("Open model")
        self.setMinimumWidth(560)
        self._start_dir = start_dir

        self.path = QLineEdit(path)
        self.path.setPlaceholderText("model.py, model.pt2, an IR file, a step_NN_*.py, or sample:NAME")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self.browse)
        file_row = QHBoxLayout()
        file_row.addWidget(self.path, 1)
        file_row.addWidget(browse)

        self.capture = QComboBox()
        for text, value in CAPTURES:
            self.capture.addItem(text, value)
        self.importer = QComboBox()
        for text, value in IMPORTERS:
            self.importer.addItem(text, value)
        self._select(self.capture, capture)
        self._select(self.importer, importer)

        self.maps = QListWidget()
        self.maps.setMaximumHeight(70)
        for m in importer_maps or ():
            self.maps.addItem(str(m))
        load_map = QPushButton("Load map…")
        load_map.setToolTip("A Python file with call_function_map = {torch.matmul: fn} (fn(bb, node_map, "
                            "node)) and/or call_module_map = {nn.Linear: fn} (fn(bb, node_map, node, "
                            "nn_mod)), as the course writes them; they extend the built-in map")
        load_map.clicked.connect(self.load_map_dialog)
        clear = QPushButton("Clear")
        clear.clicked.connect(self.clear_maps)
        map_buttons = QVBoxLayout()
        map_buttons.addWidget(load_map)
        map_buttons.addWidget(clear)
        map_buttons.addStretch(1)
        map_row = QHBoxLayout()
        map_row.addWidget(self.maps, 1)
        map_row.addLayout(map_buttons)

        self.keep_params = QCheckBox(KEEP_PARAMS_TEXT)
        self.keep_params.setToolTip(
            "Import with the weights kept as parameters of main and written to a .npz file; "
            "add BindParams to the pipeline to bind them in a step of its own")
        self.keep_params.setChecked(bool(keep_params))
        self.no_weights = QCheckBox(NO_WEIGHTS_TEXT)
        self.no_weights.setToolTip(
            "get_model() runs under torch.device('meta'): the weights are never allocated (an 8B model "
            "opens in well under a GB) and stay parameters of main with no data. Every pass, diff, "
            "query, the memory plan and the build work; runs need the weights")
        self.no_weights.setChecked(bool(no_weights))

        form = QFormLayout()
        form.addRow("File:", file_row)
        form.addRow("Capture:", self.capture)
        form.addRow("Importer:", self.importer)
        maps_box = QWidget()
        maps_box.setLayout(map_row)
        map_row.setContentsMargins(0, 0, 0, 0)
        form.addRow("Course maps:", maps_box)
        form.addRow("", self.keep_params)
        form.addRow("", self.no_weights)

        self.note = QLabel()
        self.note.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Open
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)

        untrusted = QLabel(UNTRUSTED_NOTE)
        untrusted.setObjectName("untrusted_note")
        untrusted.setWordWrap(True)

        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.note)
        layout.addWidget(untrusted)
        layout.addWidget(self.buttons)
        for w in (self.capture, self.importer):
            w.currentIndexChanged.connect(self._update)
        self.keep_params.toggled.connect(self._update)
        self.no_weights.toggled.connect(self._update)
        self.path.textChanged.connect(self._update)
        self._update()

    @staticmethod
    def _select(combo: QComboBox, value) -> None:
        i = combo.findData(value)
        combo.setCurrentIndex(max(0, i))

    # -- what the user chose ----------------------------------------------------------------------
    def map_files(self) -> list[str]:
        return [self.maps.item(i).text() for i in range(self.maps.count())]

    def choice(self) -> dict:
        return {"spec": self.path.text().strip(), "capture": self.capture.currentData(),
                "importer": self.importer.currentData(), "importer_maps": self.map_files(),
                "keep_params": self.keep_params.isChecked(), "no_weights": self.no_weights.isChecked()}

    def problem(self) -> str | None:
        """Why this combination cannot open (the same rules as the engine's), or None."""
        c = self.choice()
        if not c["spec"]:
            return "Choose a file."
        capture = c["capture"] or ("symbolic_trace" if c["importer_maps"] else None)
        if capture == "symbolic_trace" and c["importer"] == "exported_program":
            return ("TVM's exported_program importer reads torch.export graphs: import a symbolic_trace "
                    "graph with the course importer (or Auto).")
        if c["importer_maps"] and c["capture"] == "export":
            return "Course maps work on symbolic_trace graphs (call_module nodes): choose symbolic_trace or Auto."
        if c["importer_maps"] and c["importer"] == "exported_program":
            return "Course maps are used by the course importer: choose it or Auto."
        if c["no_weights"] and (capture == "symbolic_trace" or c["importer"] == "course"):
            return ("Structure only imports with torch.export and TVM's importer: the course's "
                    "importers make every weight a constant, which needs its values.")
        return None

    # -- actions ---------------------------------------------------------------------------------
    def browse(self) -> None:
        start = os.path.dirname(self.path.text()) or self._start_dir
        path, _ = QFileDialog.getOpenFileName(self, "Open model", start, OPEN_FILTER)
        if path:
            self.path.setText(path)

    def load_map_dialog(self) -> None:
        start = os.path.dirname(self.map_files()[-1]) if self.map_files() else \
            (os.path.dirname(self.path.text()) or self._start_dir)
        path, _ = QFileDialog.getOpenFileName(self, "Load course map file", start, MAP_FILTER)
        if path:
            self.add_map(path)

    def add_map(self, path: str) -> None:
        """Later files win for the same key, so a file loaded again moves to the end."""
        for i in range(self.maps.count()):
            if self.maps.item(i).text() == path:
                self.maps.takeItem(i)
                break
        self.maps.addItem(path)
        self._update()

    def clear_maps(self) -> None:
        self.maps.clear()
        self._update()

    def _update(self) -> None:
        problem = self.problem()
        self.buttons.button(QDialogButtonBox.StandardButton.Open).setEnabled(problem is None)
        if problem is not None:
            self.note.setText(problem)
        elif self.map_files() or self.capture.currentData() == "symbolic_trace":
            self.note.setText("The FX pane shows the module-level graph (call_module / call_function), "
                              "imported with the course's from_fx; map entries replace the built-in "
                              "ones (nn.Linear, nn.ReLU, torch.matmul, torch.relu, operator.add, …).")
        else:
            self.note.setText("Auto opens a model with torch.export and TVM's importer, unless the file "
                              "sets IRVIZ_CAPTURE / IRVIZ_IMPORTER.")
