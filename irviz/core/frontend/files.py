"""What a model file and an IR file share: the spec the user types (FILE.py, FILE.py:NAME,
sample:NAME), the path as messages show it, executing the file afresh, and telling an IR file from a
model file by reading it. No torch and no TVM here: ``irviz samples`` lists files through it.
"""
from __future__ import annotations

import ast
import itertools
import re
import sys
import traceback
from pathlib import Path

from irviz.core.errors import LoadError
from irviz.core.user_code import exception_line, exec_file

FACTORY = "get_irmodule"  # an IR file's function returning its IRModule

_counter = itertools.count()
_loaded_names: dict[str, str] = {}  # resolved path -> sys.modules name of its latest load


def parse_spec(spec: str) -> tuple[str, str | None, str | None]:
    """-> (kind, path_or_name, factory): kind is "sample" | "file"."""
    spec = spec.strip()
    if spec.startswith("sample:"):
        return "sample", spec[len("sample:"):].strip(), None
    # FILE.py:NAME — split on the last colon only when the right side is an identifier, so
    # Windows drive letters ("C:\\m.py") and colons inside directory names stay in the path.
    m = re.match(r"^(.*\.(?:py|pt2)):([A-Za-z_][A-Za-z0-9_]*)$", spec)
    if m:
        return "file", m.group(1), m.group(2)
    if ":" in spec and not Path(spec).exists():
        head, _, tail = spec.rpartition(":")
        if tail.isidentifier() and head:
            return "file", head, tail
    return "file", spec, None


def shown_path(path: Path) -> str:
    """Path as short as possible for messages (relative to cwd when inside it)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def exec_model_file(path: Path, shown: str):
    """Execute the file as a fresh module with a unique name (older loads of it are dropped)."""
    key = str(path)
    old = _loaded_names.pop(key, None)
    if old:
        sys.modules.pop(old, None)
    modname = f"_irviz_model_{re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}_{next(_counter)}"
    try:
        with _forget_new_local_modules(str(path.parent)):
            module = exec_file(path, modname)
    except BaseException as e:  # includes SystemExit from a script-style file
        if isinstance(e, KeyboardInterrupt):
            raise
        if isinstance(e, SystemExit):
            msg = f"{shown} called sys.exit({e.code!r}) while being imported"
        else:
            msg = f"Error while importing {shown}: {exception_line(e)}{_user_frame(e, path)}"
        raise LoadError(
            msg,
            hint="The file is executed when loaded; guard script code with `if __name__ == \"__main__\":` "
            "and check its imports.",
            detail=traceback.format_exc(),
        ) from None
    _loaded_names[key] = modname
    return module


def _user_frame(e: BaseException, path: Path | None) -> str:
    """'\\n    at file.py:LINE: code' for the deepest traceback frame in the user's file (or dir)."""
    frames = traceback.extract_tb(e.__traceback__)
    if not frames:
        return ""
    pick = None
    if path is not None:
        target = str(path)
        for fr in frames:
            if _same_file(fr.filename, target):
                pick = fr
        if pick is None:  # e.g. a helper module next to the model file
            parent = str(path.parent)
            for fr in frames:
                if fr.filename.startswith(parent) and "site-packages" not in fr.filename:
                    pick = fr
    else:
        for fr in frames:
            if "site-packages" not in fr.filename and "/torch/" not in fr.filename:
                pick = fr
    if pick is None:
        return ""
    code = (pick.line or "").strip()
    return f"\n    at {Path(pick.filename).name}:{pick.lineno}" + (f": {code}" if code else "")


def _same_file(a: str, b: str) -> bool:
    try:
        return a == b or Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


class _forget_new_local_modules:
    """Modules first imported from the model file's own directory are dropped when a file of that
    directory is loaded again, so that editing a sibling helper and loading again picks up the edit.
    They stay in sys.modules until then: torch.export and Dynamo look a class up by its module's
    name (a model whose layers live in a sibling file failed to export with a KeyError)."""

    loaded: dict[str, set[str]] = {}  # directory -> the sibling modules its loads imported

    def __init__(self, d: str, drop_earlier: bool = True):
        self.d = str(Path(d).resolve())
        self.drop_earlier = drop_earlier  # False: the factory's call, after this load's execution

    def __enter__(self):
        if self.drop_earlier:
            for name in self.loaded.pop(self.d, set()):
                sys.modules.pop(name, None)
        self.before = set(sys.modules)

    def __exit__(self, *exc):
        new = set()
        for name in set(sys.modules) - self.before:
            if name.startswith("_irviz_model_"):
                continue
            f = getattr(sys.modules.get(name), "__file__", None)
            if f and str(Path(f).resolve().parent) == self.d:
                new.add(name)
        self.loaded[self.d] = self.loaded.get(self.d, set()) | new
        return False


def _is_ir_module_class(node) -> bool:
    if not isinstance(node, ast.ClassDef):
        return False
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "ir_module":
            return True
    return False


def is_ir_file(path, name: str | None = None) -> bool:
    """True for a .py file that defines an IRModule and no get_model() (read, not executed)."""
    p = Path(path)
    if p.suffix != ".py" or not p.is_file():
        return False
    try:
        tree = ast.parse(p.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return False
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    if name is not None:
        node = defs.get(name)
        return _is_ir_module_class(node) or (name == FACTORY and node is not None) or (
            node is None and "get_model" not in defs and _assigns(tree, name))
    if "get_model" in defs:
        return False
    return FACTORY in defs or any(_is_ir_module_class(n) for n in tree.body)


def _assigns(tree, name: str) -> bool:
    return any(isinstance(n, ast.Assign) and any(getattr(t, "id", None) == name for t in n.targets)
               for n in tree.body)
