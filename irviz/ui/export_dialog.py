"""File ▸ Export: the folder, and whether to put torch.compile beside TVM in it (as `irviz export
--peer inductor [--peer-freezing]`: peer/peer.json, each Inductor kernel's code, and the side by
side section of report.html), compiled with or without Inductor's freezing."""
from __future__ import annotations

from PySide6.QtWidgets import (QCheckBox, QDialog, QDialogButtonBox, QFileDialog, QFormLayout, QHBoxLayout,
                               QLabel, QLineEdit, QPushButton, QWidget)

from irviz.protocol.commands import State

PEER_TIP = ("Compile the model with torch.compile (Inductor, CPU) too and write its kernels' code in "
            "peer/ and the FX nodes side by side with TVM's run of the cursor step in report.html; "
            "compiling takes 20–100 s")
FREEZING_TIP = ("Inductor's freezing=True, as torch.compile is usually run for inference: the weights "
                "constants, batch norms folded into the convolutions, weights prepacked for mkldnn")


def peer_unavailable(state: State | None) -> str | None:
    """Why the model has no peer to compile (None: it has one)."""
    if state is None:
        return None
    if state.get("structure_only"):
        return "No weights (structure only): torch.compile needs a model it can run"
    if state.get("importer") == "tvmscript":
        return "An IR file has no PyTorch model for torch.compile to compile"
    return None


class ExportDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, current_only: bool = False, folder: str = "",
                 state: State | None = None, peer: bool = False, freezing: bool = False):
        super().__init__(parent)
        cursor = state.get("cursor", 0) if state is not None else 0
        self.setWindowTitle(f"Export step {cursor}" if current_only else "Export the whole trace")
        self.folder = QLineEdit(folder)
        self.folder.setObjectName("ExportFolder")
        self.folder.setPlaceholderText("a folder to write into")
        self.folder.textChanged.connect(self._update)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        row = QHBoxLayout()
        row.addWidget(self.folder, 1)
        row.addWidget(browse)
        self.peer = QCheckBox(f"torch.compile (Inductor) beside TVM at step {cursor} (compiles: 20–100 s)")
        self.peer.setObjectName("ExportPeer")
        self.freezing = QCheckBox("with freezing (the weights constants, as for inference)")
        self.freezing.setObjectName("ExportPeerFreezing")
        self.freezing.setToolTip(FREEZING_TIP)
        self.why = QLabel("")
        self.why.setProperty("role", "dim")
        self.why.setWordWrap(True)
        unavailable = peer_unavailable(state)
        self.peer.setChecked(peer and unavailable is None)
        self.peer.setEnabled(unavailable is None)
        self.peer.setToolTip(unavailable or PEER_TIP)
        self.freezing.setChecked(freezing)
        self.why.setText(unavailable or "")
        self.why.setVisible(unavailable is not None)
        self.peer.toggled.connect(self._update)
        form = QFormLayout(self)
        form.addRow("Folder", row)
        form.addRow("Peer", self.peer)
        form.addRow("", self.freezing)
        form.addRow(self.why)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.button(QDialogButtonBox.StandardButton.Save).setText("Export")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        form.addRow(self.buttons)
        self.setMinimumWidth(520)
        self._update()

    def _browse(self) -> None:
        out = QFileDialog.getExistingDirectory(self, "Export to folder", self.folder.text())
        if out:
            self.folder.setText(out)

    def _update(self, *_) -> None:
        self.freezing.setEnabled(self.peer.isChecked())
        self.buttons.button(QDialogButtonBox.StandardButton.Save).setEnabled(bool(self.folder.text().strip()))

    def choice(self) -> dict:
        """{"out_dir", "peer": "inductor" | None, "peer_freezing"}: the export command's arguments."""
        peer = self.peer.isChecked() and self.peer.isEnabled()
        return {"out_dir": self.folder.text().strip(), "peer": "inductor" if peer else None,
                "peer_freezing": peer and self.freezing.isChecked()}


def exported_text(result: dict) -> str:
    """'Exported 12 files to DIR; torch.compile (inductor, freezing) beside step 5: 8 kernels'"""
    files = result.get("files") or []
    text = f"Exported {len(files)} files to {result.get('path', '')}"
    peer = result.get("peer")
    if not peer:
        return text
    what = f"torch.compile ({peer.get('compiler')}{', freezing' if peer.get('freezing') else ''})"
    if peer.get("error"):
        return f"{text}; {what} not compiled: {peer['error']}"
    return f"{text}; {what} beside step {peer.get('step')}: {peer.get('kernels')} kernels in peer/"


def ask_export(parent, current_only: bool, state: State | None, settings) -> dict | None:
    """The dialog, with the last folder and peer choice remembered in `settings` (a QSettings);
    None when cancelled."""
    dlg = ExportDialog(parent, current_only, str(settings.value("export/dir", "") or ""), state,
                       peer=settings.value("export/peer", False, type=bool),
                       freezing=settings.value("export/peer_freezing", False, type=bool))
    if not dlg.exec():
        return None
    choice = dlg.choice()
    settings.setValue("export/dir", choice["out_dir"])
    if dlg.peer.isEnabled():  # a model without a peer leaves the choice for the next one
        settings.setValue("export/peer", choice["peer"] is not None)
        settings.setValue("export/peer_freezing", dlg.freezing.isChecked())
    return choice
