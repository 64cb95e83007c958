"""The Diff pane's choice of what to compare: the IR of two steps, or one kernel's code (assembly,
LLVM IR or GPU source) between two steps or two targets (AVX2 against AVX-512 of one step)."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from irviz.ui.panes.kernel_code_tab import FORMAT_TITLES, HOST, fill_target_box

IR, CODE = "IR", "Kernel code"


def _target_box(tip: str, default: str) -> QComboBox:
    box = QComboBox()
    box.setEditable(True)
    box.addItem(default)  # the engine's list_targets fills the rest (fill_targets)
    box.setCurrentText(default)
    box.setToolTip(tip)
    box.setMinimumContentsLength(9)
    return box


class CodeDiffBar(QWidget):
    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.what = QComboBox()
        self.what.addItems([IR, CODE])
        self.what.setToolTip("Compare the IR of two steps, or one kernel's code between two steps "
                             "or two targets")
        self.kernel = QComboBox()
        self.kernel.setMinimumContentsLength(22)
        self.kernel.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.kernel.setToolTip("The kernel (PrimFunc) whose code is compared")
        self.target_a = _target_box("Target of the left side (a name, or a TVM target as JSON)", HOST)
        self.target_b = _target_box("Target of the right side", HOST)
        self.format = QComboBox()
        self.format.addItem("asm / source", None)
        for fmt in ("asm", "ll"):
            self.format.addItem(FORMAT_TITLES[fmt], fmt)
        self.format.setToolTip("Assembly or LLVM IR for a CPU; a GPU target has its source only")
        self._code_widgets = [QLabel("Kernel"), self.kernel, QLabel("on"), self.target_a, QLabel("→"),
                              self.target_b, self.format]
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.what)
        for w in self._code_widgets:
            lay.addWidget(w)
        lay.addStretch(1)
        self.what.currentIndexChanged.connect(self._what_changed)
        self.kernel.activated.connect(lambda _i: self.changed.emit())
        self.format.activated.connect(lambda _i: self.changed.emit())
        for box in (self.target_a, self.target_b):
            box.activated.connect(lambda _i: self.changed.emit())
            editor = box.lineEdit()
            assert editor is not None  # an editable combo box has its line edit
            editor.returnPressed.connect(self.changed.emit)
        self._what_changed()

    def code_mode(self) -> bool:
        return self.what.currentText() == CODE

    def set_code_mode(self, on: bool) -> None:
        self.what.setCurrentText(CODE if on else IR)

    def _what_changed(self, _i=None) -> None:
        for w in self._code_widgets:
            w.setVisible(self.code_mode())
        self.changed.emit()

    def set_kernels(self, names: list[str]) -> None:
        if [self.kernel.itemText(i) for i in range(self.kernel.count())] == names:
            return
        keep = self.kernel.currentText()
        self.kernel.blockSignals(True)
        self.kernel.clear()
        self.kernel.addItems(names)
        if keep in names:
            self.kernel.setCurrentText(keep)
        self.kernel.blockSignals(False)

    def set_kernel(self, name: str) -> None:
        """A kernel selected elsewhere (TensorIR); kept even if the cursor's step lacks it."""
        if self.kernel.findText(name) < 0:
            self.kernel.addItem(name)
        if self.kernel.currentText() != name:
            self.kernel.setCurrentText(name)
            if self.code_mode():
                self.changed.emit()

    def fill_targets(self, targets: list[dict]) -> None:
        """The engine's `list_targets`, in both sides' boxes; the chosen texts stay."""
        for box in (self.target_a, self.target_b):
            fill_target_box(box, targets)

    def request_args(self) -> dict | None:
        """The kernel_code_diff arguments besides the steps, or None when no kernel is chosen."""
        kernel = self.kernel.currentText().strip()
        if not kernel:
            return None
        return {"kernel": kernel, "target_a": self.target_a.currentText().strip() or "host",
                "target_b": self.target_b.currentText().strip() or "host",
                "format": self.format.currentData()}
