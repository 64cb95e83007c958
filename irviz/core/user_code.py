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
