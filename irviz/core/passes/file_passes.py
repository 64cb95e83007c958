"""The TVM passes a pass file defines, as the course writes them, each made a PassSpec:

* classes decorated with ``@tvm.ir.transform.module_pass(opt_level=..., name=...)``,
  ``@relax.transform.function_pass(...)`` or ``@relax.transform.dataflowblock_pass(...)``: the
  decorator turns the class into a pass class whose instances are Passes. The pass is named by the
  decorator's ``name=`` (else the class's name); the class's ``__init__`` parameters become the
  pass's parameters (``MyPass(factor=2)`` in a pipeline text);
* Pass instances bound at the file's top level (``@module_pass`` on a function,
  ``tvm.transform.Sequential([...])``), named by their pass name; a Sequential left with TVM's
  default name "sequential" takes its variable's name.

Only what the file itself defines counts: names bound by ``import`` are left out, an instance of
one of the file's pass classes is that class's pass, and a TVM pass the file merely creates
(``relax.transform.FuseOps()``) is the built-in it already is.
"""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import tvm

from irviz.core.errors import PassError
from irviz.core.passes.registry import PassParam, PassSpec, find_pass

_PARAM_KIND_OF = {bool: "bool", int: "int", float: "float", str: "str"}


def params_from_signature(fn, skip_first: bool, owner: str) -> list[PassParam]:
    """Pass parameters from `fn`'s keyword parameters: the default's type (else the annotation)
    gives the kind, bool/int/float/str, anything else is "json"; `owner` names them in help."""
    params = []
    items = list(inspect.signature(fn).parameters.values())
    if skip_first and items:
        items = items[1:]
    for p in items:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = None if p.default is p.empty else p.default
        kind = _PARAM_KIND_OF.get(type(default)) if default is not None else \
            _PARAM_KIND_OF.get(p.annotation) if isinstance(p.annotation, type) else None
        if kind is None and isinstance(p.annotation, str):
            kind = {"bool": "bool", "int": "int", "float": "float", "str": "str"}.get(p.annotation)
        required = " (required)" if p.default is p.empty else ""
        params.append(PassParam(p.name, kind or "json", default, f"{p.name} of {owner}{required}"))
    return params


def top_level_lines(path: Path) -> dict[str, int]:
    """Names the file binds at top level with def, class or an assignment -> their line."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    lines: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            lines.setdefault(node.name, node.lineno)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        lines.setdefault(n.id, node.lineno)
    return lines


def _decorated(cls) -> tuple[type, object] | None:
    """(the user's class, its PassInfo) of a class made by TVM's pass decorators, else None."""
    init = cls.__dict__.get("__init__")
    code = getattr(init, "__code__", None)
    if code is None or set(code.co_freevars) != {"pass_cls", "pass_info"}:
        return None
    cells = dict(zip(code.co_freevars, (c.cell_contents for c in init.__closure__)))
    return cells["pass_cls"], cells["pass_info"]


def _kind(cls) -> str:
    for base, word in ((tvm.ir.transform.ModulePass, "module_pass"),
                       (tvm.relax.transform.FunctionPass, "function_pass"),
                       (tvm.relax.transform.DataflowBlockPass, "dataflowblock_pass")):
        if issubclass(cls, base):
            return word
    return "pass"


def _first_doc_line(obj) -> str:
    lines = (inspect.getdoc(obj) or "").strip().splitlines()
    return lines[0] if lines else ""


def _class_spec(var: str, cls, pass_cls, info, source: str) -> PassSpec:
    name = str(info.name)
    params = params_from_signature(cls, skip_first=False, owner=pass_cls.__name__)
    required = [p.name for p in params if p.help.endswith("(required)")]

    def make(**values):
        missing = [n for n in required if values.get(n) is None]
        if missing:
            raise PassError(
                f"{name} needs {', '.join(missing)} (its class {pass_cls.__name__} takes "
                f"{'them' if len(missing) > 1 else 'it'} without a default)",
                hint=f"write {name}({missing[0]}=VALUE) in the pipeline; defined at {source}",
            )
        return cls(**values)

    desc = _first_doc_line(pass_cls) or f"{_kind(cls)} class {var} (opt_level {int(info.opt_level)})"
    return PassSpec(name=name, description=desc, params=params, make=make, source=source)


def _instance_spec(var: str, value, source: str) -> PassSpec:
    name = str(value.info.name)
    if isinstance(value, tvm.transform.Sequential) and name == "sequential":
        name = var
    inner = [str(p.info.name) for p in getattr(value, "passes", ())]
    desc = (f"Sequential of {', '.join(inner)}" if isinstance(value, tvm.transform.Sequential)
            else f"{type(value).__name__} {var} (opt_level {int(value.info.opt_level)})")
    return PassSpec(name=name, description=desc, params=[], make=lambda: value, source=source)


def tvm_passes_of(module, mod_name: str, path: Path) -> list[PassSpec]:
    """PassSpecs (category "user", source "file:line") of the TVM passes the executed file defines,
    in file order."""
    lines = top_level_lines(path)
    classes: list[type] = []
    found: list[tuple[int, PassSpec]] = []
    instances = []
    for var, value in vars(module).items():
        if var not in lines:
            continue
        source = f"{path}:{lines[var]}"
        if isinstance(value, type) and issubclass(value, tvm.ir.transform.Pass):
            decorated = _decorated(value)
            if decorated is None or getattr(decorated[0], "__module__", None) != mod_name:
                continue
            classes.append(value)
            found.append((lines[var], _class_spec(var, value, *decorated, source)))
        elif isinstance(value, tvm.ir.transform.Pass):
            instances.append((var, value, source))
    for var, value, source in instances:
        if isinstance(value, tuple(classes)):
            continue  # the class's pass, with its parameters
        spec = _instance_spec(var, value, source)
        builtin = find_pass(spec.name)
        if (builtin is not None and builtin.category not in ("user", "course")
                and not isinstance(value, tvm.transform.Sequential)):
            continue  # e.g. relax.transform.FuseOps(): TVM's own pass, already built in
        found.append((lines[var], spec))
    return [spec for _line, spec in sorted(found, key=lambda item: item[0])]
