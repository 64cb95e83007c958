"""Running a user's Python file (pass files, converter files) as a fresh module."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def exec_file(path: Path, modname: str):
    """Execute `path` as module `modname` and return it; its folder is importable while it runs.

    A failure removes the half-made module and re-raises the user's exception unchanged, so each
    caller words the error for its own kind of file."""
    spec = importlib.util.spec_from_file_location(modname, str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    folder = str(Path(path).parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(modname, None)
        raise
    finally:
        if added:
            try:
                sys.path.remove(folder)
            except ValueError:
                pass
    return module
