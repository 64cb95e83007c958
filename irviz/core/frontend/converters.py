"""User converter files: a user's PyTorch -> Relax converters for ops TVM cannot import.

irviz's built-in converters (``irviz.core.frontend.builtin_converters``) are handed to TVM's
``ExportedProgramImporter`` as a ``custom_convert_map`` by ``importer.import_model``; a user's
converters go on top of them (same key: the user's wins).  TVM's installed files are never patched.

User converter files
--------------------
A Python file that defines ``CONVERTERS``: a dict from the op to a converter function::

    from tvm import relax

    def convert_erfinv(node, importer):
        x = importer.env[node.args[0]]                  # the Relax value of the node's input
        return importer.block_builder.emit(...)         # emit Relax, return the new var

    CONVERTERS = {"aten.erfinv.default": convert_erfinv}

Keys are the op's overload name as the importer looks it up (``node.target.__name__``, e.g.
``"erfinv.default"``); ``"aten.erfinv.default"``, ``torch.ops.aten.erfinv.default`` and
``"aten.erfinv"`` (every overload of that aten op) are accepted too.  ``load_converter_file(path)``
executes the file afresh each time (edit it and load it again: no restart) and returns the
normalised dict; every problem is a LoadError naming ``file:line``.  See
``irviz/samples/example_converter.py``.
"""
from __future__ import annotations

import ast
import difflib
import itertools
import re
import traceback
from pathlib import Path
from collections.abc import Callable

from irviz.core.errors import LoadError
from irviz.core.frontend import builtin_converters as builtin
from irviz.core.frontend import repeat_converters, select_converters
from irviz.core.user_code import exception_line, exec_file

__all__ = [
    "CONVERTERS_NAME",
    "builtin_converters",
    "converter_origin",
    "load_converter_file",
    "normalize_key",
]

CONVERTERS_NAME = "CONVERTERS"
_counter = itertools.count()


def builtin_converters() -> dict[str, Callable]:
    return {**builtin.BUILTIN_CONVERTERS, **select_converters.CONVERTERS, **repeat_converters.CONVERTERS}


def converter_origin(fn) -> str:
    """'file.py:LINE' where a converter function is defined ('' if unknown)."""
    fn = getattr(fn, "__wrapped__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return ""
    return f"{_shown(Path(code.co_filename))}:{code.co_firstlineno}"


# ---------------------------------------------------------------------------------------------
# keys


def _aten_packet(name: str):
    import torch

    try:
        return getattr(torch.ops.aten, name)
    except (AttributeError, RuntimeError):
        return None


def normalize_key(key) -> list[str]:
    """Importer keys for one CONVERTERS key (ValueError with a message if it cannot be one).

    OpOverload -> its ``__name__``; "aten.x.y" -> "x.y"; "aten.x" and torch.ops.aten.x -> every
    overload "x.default", "x.Tensor", ...; "x.y" stays (checked against aten when x is an aten
    op); a bare "x" stays as it is (TVM keys Python operators that way: "mul", "getitem").
    """
    if not isinstance(key, str):
        name = getattr(key, "__name__", None)
        if not isinstance(name, str):
            raise ValueError(f"key {key!r} is a {type(key).__name__}; use the op's name, e.g. "
                             "'aten.erfinv.default' or torch.ops.aten.erfinv.default")
        if "." not in name:  # an OpOverloadPacket: torch.ops.aten.erfinv
            key = "aten." + name
        else:
            return [name]
    key = key.strip()
    explicit_aten = key.startswith("aten.") or key.startswith("aten::")
    if explicit_aten:
        key = key[5:] if key.startswith("aten.") else key[6:]
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?", key):
        raise ValueError(f"key {key!r} is not an op name like 'erfinv.default' or 'aten.erfinv.default'")
    name, _, overload = key.partition(".")
    packet = _aten_packet(name)
    if packet is None:
        if explicit_aten:
            import torch

            close = difflib.get_close_matches(name, dir(torch.ops.aten), n=3)
            also = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ValueError(f"there is no aten op {name!r}{also}")
        return [key]  # another namespace's op, or a Python operator ("getitem", "mul")
    overloads = list(packet.overloads())
    if not overload:
        if explicit_aten:  # "aten.erfinv": every overload of the aten op
            return [f"{name}.{o}" for o in overloads]
        return [key]  # TVM's convention: a bare name is a Python operator ("mul", "getitem")
    if overload not in overloads:
        raise ValueError(f"aten.{name} has no overload {overload!r}; its overloads: "
                         f"{', '.join(overloads)}")
    return [key]


# ---------------------------------------------------------------------------------------------
# converter files


def load_converter_file(path) -> dict[str, Callable]:
    """Execute a converter file and return its CONVERTERS with importer keys ("erfinv.default").

    LoadError (message naming file:line, hint) when the file is missing, does not parse, raises
    while executing, lacks CONVERTERS, or has a bad key or a non-callable value.
    """
    p = Path(str(path)).expanduser()
    shown = _shown(p)
    if not p.exists():
        raise LoadError(f"No such converter file: {path}",
                        hint="Give a .py file that defines CONVERTERS = {'aten.op.overload': fn}; "
                        "see irviz/samples/example_converter.py.")
    if p.is_dir() or p.suffix.lower() != ".py":
        raise LoadError(f"{shown} is not a Python file.",
                        hint="A converter file is a .py file that defines CONVERTERS = {'aten.op.overload': fn}.")
    p = p.resolve()
    try:
        source = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise LoadError(f"Cannot read {shown}: {e}", hint="Check the file's permissions and encoding (UTF-8).") from None
    try:
        tree = ast.parse(source, str(p))
    except SyntaxError as e:
        where = f"{shown}:{e.lineno}" if e.lineno else shown
        code = (e.text or "").strip()
        raise LoadError(f"Syntax error in {where}: {e.msg}" + (f"\n    {code}" if code else ""),
                        hint="Fix the Python syntax in the converter file and load it again.",
                        detail=traceback.format_exc()) from None
    conv_line = _assignment_line(tree, CONVERTERS_NAME)

    modname = f"_irviz_converters_{re.sub(r'[^0-9A-Za-z_]', '_', p.stem)}_{next(_counter)}"
    try:
        module = exec_file(p, modname)
    except BaseException as e:  # the user's code can raise anything
        if isinstance(e, KeyboardInterrupt):
            raise
        line = _file_line(e, p)
        where = f"{shown}:{line}" if line else shown
        what = f"called sys.exit({e.code!r})" if isinstance(e, SystemExit) else f"raised {exception_line(e)}"
        raise LoadError(f"Converter file {where} {what} while being loaded",
                        hint="The file is executed when loaded; check its imports and top-level code.",
                        detail=traceback.format_exc()) from None

    if not hasattr(module, CONVERTERS_NAME):
        defined = [k for k, v in vars(module).items()
                   if callable(v) and getattr(v, "__module__", None) == modname]
        listing = f" Functions it defines: {', '.join(defined)}." if defined else ""
        raise LoadError(f"{shown} does not define {CONVERTERS_NAME}.{listing}",
                        hint=f"Add {CONVERTERS_NAME} = {{'aten.op.overload': converter_function}}, "
                        "e.g. {'aten.erfinv.default': convert_erfinv}.")
    table = getattr(module, CONVERTERS_NAME)
    where = f"{shown}:{conv_line}" if conv_line else shown
    if not isinstance(table, dict):
        raise LoadError(f"{CONVERTERS_NAME} in {where} is a {type(table).__name__}; expected a dict.",
                        hint=f"{CONVERTERS_NAME} = {{'aten.op.overload': fn}} maps an op to fn(node, importer).")
    if not table:
        raise LoadError(f"{CONVERTERS_NAME} in {where} is empty.",
                        hint="Add an entry {'aten.op.overload': fn} for the op that failed to import.")
    out: dict[str, Callable] = {}
    for key, fn in table.items():
        try:
            keys = normalize_key(key)
        except ValueError as e:
            raise LoadError(f"{CONVERTERS_NAME} in {where}: {e}",
                            hint="Keys are op overload names as in the FX graph's target, e.g. "
                            "'aten.erfinv.default' (the import error names the op).") from None
        if not callable(fn):
            raise LoadError(f"{CONVERTERS_NAME}[{key!r}] in {where} is a {type(fn).__name__}, not a function.",
                            hint="Values are functions fn(node, importer) returning the Relax var they emit.")
        for k in keys:
            out[k] = fn
    return out


def _assignment_line(tree, name: str) -> int | None:
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Name) and t.id == name:
                return node.lineno
    return None


def _file_line(exc: BaseException, path: Path) -> int | None:
    line = None
    for fr in traceback.extract_tb(exc.__traceback__):
        if _same_file(fr.filename, path):
            line = fr.lineno
    if line is None and isinstance(exc, SyntaxError) and exc.lineno:
        return exc.lineno
    return line


def converter_error_location(exc: BaseException, fn) -> str:
    """'file.py:LINE' of the deepest frame inside the converter's own file, else where fn is defined."""
    fn = getattr(fn, "__wrapped__", fn)
    code = getattr(fn, "__code__", None)
    if code is not None:
        line = _file_line(exc, Path(code.co_filename))
        if line:
            return f"{_shown(Path(code.co_filename))}:{line}"
    return converter_origin(fn)


def _same_file(a, b) -> bool:
    try:
        return str(a) == str(b) or Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def _shown(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except (ValueError, OSError):
        return str(path)
