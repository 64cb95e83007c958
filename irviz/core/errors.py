"""Errors a user sees. Each names the stage it failed in and says what to do next."""
from __future__ import annotations

STAGES = ("load", "capture", "import", "pipeline", "build", "run", "compare")


class IrvizError(Exception):
    """Base error: `stage` is one of STAGES, `hint` says what the user can do about it."""

    stage = "load"

    def __init__(self, message: str, hint: str | None = None, *, detail: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.detail = detail  # full traceback text, shown only on request (--verbose, "Details")

    def user_message(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class LoadError(IrvizError):
    stage = "load"


class CaptureError(IrvizError):
    stage = "capture"


class IRImportError(IrvizError):
    stage = "import"

    def __init__(self, message, hint=None, *, detail=None, node=None, op=None):
        super().__init__(message, hint, detail=detail)
        self.node = node  # FX node name that failed to convert
        self.op = op  # its target, e.g. "aten.cat.default"


class PassError(IrvizError):
    stage = "pipeline"


class BuildError(IrvizError):
    stage = "build"


class RunError(IrvizError):
    stage = "run"


class ExportError(IrvizError):
    stage = "export"
