"""Errors a user sees. Each names the stage it failed in and says what to do next."""
from __future__ import annotations

import traceback

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


class RequestError(IrvizError):
    """What was asked cannot be done as asked: no model open, no such step, a bad argument."""

    stage = "request"


_BACKTRACE_NOISE = ("TVM_BACKTRACE", "Traceback (most recent call last)")


def tvm_error_text(exc: BaseException, *, head: int = 30, tail: int = 10,
                   with_type: bool = False) -> str:
    """The message of an exception, TVM's included, without backtrace noise.

    TVM's ``sys.excepthook`` may print only "note: run with TVM_BACKTRACE=1" while ``str(exc)`` holds
    the real text; its C++ errors can also carry whole printed functions. Keeps the first ``head``
    and the last ``tail`` lines (the cause is usually at one end); the full text belongs in
    ``IrvizError.detail``.
    """
    text = str(exc).strip()
    if not text and exc.args:
        text = " ".join(str(a) for a in exc.args).strip()
    lines = [ln.rstrip() for ln in text.splitlines()
             if ln.strip() and not any(n in ln for n in _BACKTRACE_NOISE)
             and not ln.lstrip().startswith('File "')]
    if len(lines) > head + tail:
        lines = lines[:head] + [f"  ... ({len(lines) - head - tail} more lines)"] + (lines[-tail:] if tail else [])
    name = type(exc).__name__
    msg = "\n".join(lines)
    if not msg:
        return name
    return f"{name}: {msg}" if with_type and not msg.startswith(name) else msg


def traceback_text(exc: BaseException) -> str:
    """The whole traceback of `exc`, as ``IrvizError.detail`` keeps it."""
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
