"""A model opened with a pipeline the engine refuses (`irviz MODEL --pipeline BAD`): the pipeline
fails before anything loads, so the model opens again with the zero pipeline and a dialog says why,
in the engine's words with its hint; a status-bar line alone was easy to miss at launch, and no
model at all hid that only the pipeline was wrong."""
from __future__ import annotations

from PySide6.QtWidgets import QMessageBox

FALLBACK = "zero"


def refused_pipeline(args: dict | None, error: dict) -> bool:
    """Whether an open of `args` failed on its pipeline alone (nothing was loaded yet)."""
    pipeline = (args or {}).get("pipeline")
    return (bool(args) and error.get("stage") == "pipeline" and pipeline not in (None, "", FALLBACK)
            and not str(error.get("message", "")).startswith("schedule()"))


def reopen_with_zero(window, args: dict, error: dict) -> QMessageBox:
    """Open `args` again with the zero pipeline and show the refusal in a non-modal dialog (the
    open goes on behind it); the dialog is returned and kept as `window.pipeline_error_box`."""
    msg = error.get("message", "failed")
    hint = error.get("hint")
    text = (f"The pipeline {args['pipeline']!r} was refused, so {args['spec']} opens with the "
            f"{FALLBACK} pipeline instead.")
    box = QMessageBox(QMessageBox.Icon.Warning, "Pipeline not used", text,
                      QMessageBox.StandardButton.Ok, window)
    box.setInformativeText(msg + (f"\n\nHint: {hint}" if hint else ""))
    box.setModal(False)
    box.setObjectName("pipelineErrorBox")
    window.pipeline_error_box = box
    window.messages.append(f"Pipeline not used: {msg}")
    window.open_spec(**dict(args, pipeline=FALLBACK))
    window.status(f"pipeline: {msg.splitlines()[0]} — opened with the {FALLBACK} pipeline", error=True)
    box.show()
    return box
