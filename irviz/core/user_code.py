"""Running a user's Python file (model files, pass files, converter files) as a fresh module."""
from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path


@contextlib.contextmanager
def importable_folder(folder: str | Path):
    """Put `folder` first on sys.path for the block, so a user's file can import its neighbours."""
    folder = str(folder)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        yield
    finally:
        if added:
            try:
                sys.path.remove(folder)
            except ValueError:
                pass


def exec_file(path: Path, modname: str):
    """Execute `path` as module `modname` and return it; its folder is importable while it runs.

    The module is in sys.modules while it runs, because dataclasses, pickling and torch look
    classes up by module name. A failure removes the half-made module and re-raises the user's
    exception unchanged (SystemExit and KeyboardInterrupt too), so each caller words the error
    for its own kind of file."""
    spec = importlib.util.spec_from_file_location(modname, str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    try:
        with importable_folder(Path(path).parent):
            spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(modname, None)
        raise
    return module


def exception_line(e: BaseException) -> str:
    """"Type: first line" of an exception raised by a user's code, for a one-line message."""
    lines = str(e).strip().splitlines()
    first = lines[0] if lines else ""
    if len(first) > 300:
        first = first[:300] + "..."
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


class CalledOnce:
    """A user's function of no arguments (get_inputs(), get_params()) called at its first call
    only; each later call gets a copy of that first result.

    A learner's get_inputs() often draws from a module-level generator, so each call returns other
    numbers: a run compared with reference() on a second draw, or a bisect whose reference saw
    other inputs than the steps it checks, would report wrong numbers that no pass made. Arrays are
    copied on each call so that a reference() or a step that writes into its inputs cannot change
    what the next one gets. A call that raises is not remembered (the next call tries again)."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "function")
        self.__doc__ = getattr(fn, "__doc__", None)
        self._called = False
        self._value = None

    def __call__(self):
        if not self._called:
            self._value = self.fn()
            self._called = True
        return fresh_copy(self._value)


def fresh_copy(value):
    """`value` with its numpy arrays and torch tensors copied, through tuples, lists and dicts."""
    if isinstance(value, tuple):
        return tuple(fresh_copy(v) for v in value)
    if isinstance(value, list):
        return [fresh_copy(v) for v in value]
    if isinstance(value, dict):
        return {k: fresh_copy(v) for k, v in value.items()}
    if type(value).__module__ == "numpy" and hasattr(value, "copy"):
        return value.copy()
    if hasattr(value, "clone") and hasattr(value, "detach"):  # a torch tensor
        return value.detach().clone()
    return value
