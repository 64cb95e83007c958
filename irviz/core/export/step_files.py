"""One exported step on disk: its TVMScript with a loader (``step_NN_<pass>.py``), its tensor
constants (``.params``), or a text-only ``.txt``; and loading such a ``.py`` back.

Round trip: ``mod.script()`` prints tensor constants as ``metadata["ir.GenericConst"][k]`` and
omits them; the parser accepts them back through ``extra_vars`` in the same order.  Scalar -inf/inf/nan constants are printed inline as
``R.const("-inf", "float32")``, which the parser rejects ("value has to be scalar or Tensor"), so
they travel the same way: appended to the table and referenced as metadata entries.
Never ``tvm.ir.save_json`` / ``script(show_meta=True)`` (both segfault in TVM 0.27).

TVM is imported inside the functions that use it: the workspace imports this module to recognise a
step file, and importing TVM loads torch too.
"""
from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import runpy
from pathlib import Path

from irviz.core.errors import ExportError, tvm_error_text
from irviz.core.export.script_names import distinct_size_names

__all__ = ["module_script", "parse_script", "tensor_constants_in_print_order", "metadata_count",
           "roundtrip_check", "add_header_note", "printer_names", "run_step_file", "write_step_file",
           "discard_step_file", "step_stem", "is_exported_step", "load_exported", "load_params",
           "jsonable"]

_CLASS_DEF_RE = re.compile(r"^    def ([A-Za-z_]\w*)\(", re.M)


def _function_print_order(mod, text: str) -> list[str]:
    names = {gv.name_hint for gv in mod.get_global_vars()}
    order = [n for n in _CLASS_DEF_RE.findall(text) if n in names]
    seen = set(order)
    return order + sorted(n for n in names if n not in seen)


# TVM 0.27's printer writes 0-d constants of these dtypes inline as R.const(v, dtype); any other
# 0-d constant (uint8, bfloat16, int4, ...) becomes a metadata entry like a tensor
_INLINE_SCALAR_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64",
                                   "float16", "float32", "float64"})


def _printed_inline(value) -> bool:
    return len(value.shape) == 0 and str(value.dtype) in _INLINE_SCALAR_DTYPES


def tensor_constants_in_print_order(mod, text: str | None = None) -> list:
    """The GenericConsts ``mod.script()`` prints as metadata entries, in the order it numbers them."""
    from irviz.core.tvm_compat import GenericConst, RuntimeTensor, relax

    if text is None:
        text = mod.script()
    order: list = []
    seen: set[int] = set()

    def visit(e):
        if (isinstance(e, GenericConst) and isinstance(e.value, RuntimeTensor)
                and not _printed_inline(e.value)):
            h = e.__chandle__()
            if h not in seen:
                seen.add(h)
                order.append(e)

    funcs = {gv.name_hint: f for gv, f in mod.functions.items()}
    for name in _function_print_order(mod, text):
        f = funcs[name]
        if isinstance(f, relax.Function):
            relax.analysis.post_order_visit(f, visit)
    return order


_META_REF_RE = re.compile(r'metadata\["ir\.GenericConst"\]\[(\d+)\]')


def metadata_count(text: str) -> int:
    """1 + the largest metadata["ir.GenericConst"][k] index in a printed script (0 if none)."""
    return max((int(k) + 1 for k in _META_REF_RE.findall(text)), default=0)


_NONFINITE_RE = re.compile(r'R\.const\("(-inf|inf|nan)", "(\w+)"\)')


def _nonfinite_scalars(mod) -> dict[tuple[str, str], object]:
    """(printed value, dtype) -> the first 0-d constant of the module printed that way."""
    import math

    from irviz.core.tvm_compat import GenericConst, RuntimeTensor, relax

    found: dict[tuple[str, str], object] = {}

    def visit(e):
        if (isinstance(e, GenericConst) and isinstance(e.value, RuntimeTensor)
                and _printed_inline(e.value) and str(e.value.dtype).startswith("float")):
            v = float(e.value.numpy())
            if not math.isfinite(v):
                word = "nan" if v != v else ("inf" if v > 0 else "-inf")
                found.setdefault((word, str(e.value.dtype)), e)

    for f in mod.functions.values():
        if isinstance(f, relax.Function):
            relax.analysis.post_order_visit(f, visit)
    return found


def _nonfinite_to_metadata(mod, text: str, consts: list) -> tuple[str, list]:
    import numpy as np

    from irviz.core.tvm_compat import relax

    scalars = _nonfinite_scalars(mod)
    table = list(consts)
    index: dict[tuple[str, str], int] = {}

    def repl(m):
        key = (m.group(1), m.group(2))
        if key not in index:
            c = scalars.get(key)
            if c is None:  # not reached by the visitor; the value is all the text says anyway
                c = relax.const(np.array(float(key[0]), dtype=key[1]))
            index[key] = len(table)
            table.append(c)
        return f'metadata["ir.GenericConst"][{index[key]}]'

    return _NONFINITE_RE.sub(repl, text), table


def module_script(mod) -> tuple[str, list]:
    """(``mod.script()``, its metadata constants in print order), with each inline scalar
    -inf/inf/nan turned into a metadata entry appended after the tensor constants, and symbolic
    sizes the parser would take for one variable given distinct names (:mod:`script_names`)."""
    text = mod.script()
    consts = tensor_constants_in_print_order(mod, text)
    if _NONFINITE_RE.search(text):
        text, consts = _nonfinite_to_metadata(mod, text, consts)
    text, _ = distinct_size_names(text)
    return text, consts


def parse_script(text: str, consts) -> object:
    """TVMScript text + constants (GenericConst or tensors, print order) -> IRModule."""
    from tvm.script import from_source

    from irviz.core.tvm_compat import GenericConst, I, R, T, quick_script_parsing, relax

    table = [c if isinstance(c, GenericConst) else relax.const(c) for c in consts]
    with quick_script_parsing():
        return from_source(text, extra_vars={"metadata": {"ir.GenericConst": table},
                                             **printer_names(), "I": I, "R": R, "T": T})


def printer_names() -> dict:
    """The names TVM 0.27's printer uses but only imports in comments (``# from typing import
    TypeVar``): symbolic sizes are printed as module-level ``m = TypeVar("m")``, layouts with
    ``Axis``.  Without them a module with ``m, n`` sizes does not parse back."""
    from typing import TypeVar

    import tvm

    names: dict = {"TypeVar": TypeVar, "tvm": tvm}
    with contextlib.suppress(ImportError):
        from tvm.tirx.layout import Axis

        names["Axis"] = Axis
    with contextlib.suppress(ImportError):
        from tvm import s_tir

        names["s_tir"] = s_tir
    return names


def _params_bytes(consts) -> bytes:
    import tvm

    return bytes(tvm.runtime.save_param_dict({f"c{k:04d}": c.value for k, c in enumerate(consts)}))


def write_params(path: Path, consts, written: dict) -> None:
    """Write the constants; when an earlier step of this export had the very same constant
    objects, hard-link its file instead (ResNet-18: 45 MB per step otherwise)."""
    key = tuple(c.__chandle__() for c in consts)
    prev = written.get(key)
    if prev is not None:
        try:
            os.link(prev, path)
            return
        except OSError:
            pass
    path.write_bytes(_params_bytes(consts))
    written[key] = path


def load_params(path) -> list:
    import tvm

    from irviz.core.tvm_compat import relax

    with open(path, "rb") as f:
        table = tvm.runtime.load_param_dict(f.read())
    return [relax.const(table[k]) for k in sorted(table)]


def run_step_file(path) -> tuple[object | None, str]:
    """Run a written step file in this process exactly as ``python step_NN.py`` does (its own
    ``load()`` and ``__main__`` block) -> (the module it loaded, "") or (None, what it printed
    on failure).  In-process: a fresh interpreter would spend seconds importing TVM per step."""
    from irviz.core.tvm_compat import quick_script_parsing  # lazy: this module stays TVM-free

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), quick_script_parsing():
            ns = runpy.run_path(str(path), run_name="__main__")
    except SystemExit as exc:
        return None, err.getvalue().strip() or f"{Path(path).name} exited with status {exc.code}"
    except Exception as exc:  # e.g. the .params file cannot be read
        return None, tvm_error_text(exc)
    mod = ns.get("mod")
    if mod is None:
        return None, f"{Path(path).name} ran but left no module in `mod`"
    return mod, ""


def _parse_error_note(message: str) -> str:
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    first = next((ln for ln in lines if ln.startswith("error:")), None)
    if first is None:
        return " ".join(lines[-3:])[:300] or "the step file failed to load"
    where = next((ln for ln in lines if ln.startswith("-->")), "")
    return f"TVM's parser rejects the printed script: {first[:200]} {where}".rstrip()


def _first_mismatch(a, b) -> str:
    try:
        import tvm_ffi

        pair = tvm_ffi.get_first_structural_mismatch(a, b)
    except Exception:  # only a detail for the note
        return ""
    return f" (first difference at {pair[0]})" if pair else ""


def roundtrip_check(path, mod) -> tuple[bool, bool, str]:
    """Run the step file written at ``path`` as a user would and compare what it loads with
    ``mod`` -> (loads, structurally equal, note).  A file can load a module that differs in
    what the printer does not show (a TIR region extent's int32 vs int64 after LegalizeOps of
    a take with int32 indices): it stays loadable and the note says so."""
    from irviz.core.tvm_compat import structural_equal

    back, message = run_step_file(path)
    if back is None:
        return False, False, _parse_error_note(message)
    if not structural_equal(back, mod):
        return True, False, ("loads back, but not structurally equal to the exported module"
                             + _first_mismatch(mod, back))
    return True, True, ""


def add_header_note(path, note: str) -> None:
    """Put a note into the header of a written step file, after its opening comment block."""
    p = Path(path)
    lines = p.read_text(encoding="utf-8").split("\n")
    at = next((k for k, ln in enumerate(lines) if ln == "#"), 3)
    p.write_text("\n".join(lines[:at] + [f"# NOTE: {note}"] + lines[at:]), encoding="utf-8")


def jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        if isinstance(obj, float) and obj != obj:
            return None
        return obj
    return str(obj)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "pass"


def string_literal(text: str) -> str:
    """`text` as a Python literal a written file can hold (raw triple quotes when it allows)."""
    if "'''" not in text and not text.endswith("\\"):
        return "r'''\n" + text + "'''"
    return repr(text)


_LOADER = '''

def load(params_path=None):
    """Parse SCRIPT with the tensor constants from the sibling .params file -> tvm.IRModule."""
    import os

    import tvm
    from tvm import relax
    from tvm.script import from_source
    from tvm.script import ir as I
    from tvm.script import relax as R
    from tvm.script import tirx as T

    if params_path is None:
        params_path = os.path.splitext(os.path.abspath(__file__))[0] + ".params"
    with open(params_path, "rb") as f:
        table = tvm.runtime.load_param_dict(f.read())
    consts = [relax.const(table[k]) for k in sorted(table)]  # keys c0000, c0001, ...: print order
    # the printer writes `m = TypeVar("m")` for symbolic sizes (and Axis for layouts) but imports
    # them only in a comment
    from typing import TypeVar

    names = {"TypeVar": TypeVar, "tvm": tvm}
    try:
        from tvm import s_tir
        from tvm.tirx.layout import Axis

        names.update(Axis=Axis, s_tir=s_tir)
    except ImportError:
        pass
    return from_source(SCRIPT, extra_vars={"metadata": {"ir.GenericConst": consts}, **names,
                                           "I": I, "R": R, "T": T})


if __name__ == "__main__":
    import os
    import re
    import sys

    try:
        mod = load()
    except Exception as exc:
        # uncaught, TVM's sys.excepthook would print only its "run with TVM_BACKTRACE=1" note
        message = "\\n".join(ln for ln in str(exc).splitlines()
                            if ln.strip() and "TVM_BACKTRACE" not in ln) or type(exc).__name__
        # the parser counts lines of SCRIPT, whose line 1 is the one that opens it: point into
        # this file instead
        with open(__file__, encoding="utf-8") as f:
            first = next((k for k, ln in enumerate(f, 1) if ln.startswith("SCRIPT = r" + "'" * 3)),
                         None)
        if first:
            here = os.path.basename(__file__)
            message = re.sub(r"<str>:(\\d+)",
                             lambda m: f"{here}:{int(m.group(1)) + first - 1}", message)
        print(f"{__file__}: TVM could not load this step:\\n{message}", file=sys.stderr)
        sys.exit(1)
    print(f"{__file__}: IRModule with {len(mod.functions)} functions: "
          + ", ".join(sorted(gv.name_hint for gv in mod.get_global_vars())))
'''


def _header_lines(session, step, stem: str, loadable: bool, note: str, text: str = "",
                  scalars_moved: bool = False) -> list[str]:
    applied = [s.pass_name for s in session.steps[1:step.index + 1]]
    what = ("the imported module" if step.index == 0 else
            f"the IRModule after {step.pass_name}, a primitive of the file's schedule(sch)"
            if getattr(step, "origin", "pass") == "schedule" else f"the IRModule after pass {step.pass_name}")
    lines = [
        f"# irviz export: step {step.index:02d} of model {session.name!r}: {what}",
        f"# importer: {getattr(session.imported, 'importer', '?')}; "
        f"pass params: {json.dumps(jsonable(step.params))}",
        f"# passes so far: {', '.join(applied) if applied else '(none)'}",
        "#",
    ]
    if loadable:
        lines += [
            "# SCRIPT below is the module's TVMScript (mod.script()).  Its tensor constants, printed as",
            f'# metadata["ir.GenericConst"][k], are in the sibling file {stem}.params',
            "# (tvm.runtime.save_param_dict; keys c0000, c0001, ... in print order).",
        ]
        if scalars_moved:
            lines += [
                '# Scalar -inf/inf/nan constants, which TVM prints as R.const("-inf", "float32") and its',
                "# parser rejects, are metadata entries too: after the tensors, in the same file.",
            ]
        lines += [
            "#",
            "# Load it (the .params file must stay next to this file):",
            f"#     python {stem}.py                       # parses it and prints a summary",
            f'#     mod = runpy.run_path("{stem}.py")["load"]()',
            f'#     mod = irviz.core.export.step_files.load_exported("{stem}.py")',
            "# Do not call mod.script(show_meta=True) or tvm.ir.save_json(mod): TVM 0.27 segfaults.",
        ]
    else:
        lines += [
            "# NOT LOADABLE: this is TVMScript for reading only.",
            f"# {note}",
        ]
        if "alloc_tensor" in text:
            lines += ["# (TVM 0.27 prints alloc_tensor(..., ty_args=...) after CallTIRRewrite /",
                      "# StaticPlanBlockMemory / RewriteCUDAGraph, which its own parser rejects.)"]
        lines.append('# Tensor constants are omitted (printed as metadata["ir.GenericConst"][k]).')
    return lines

def step_stem(index: int, pass_name: str) -> str:
    """``step_NN_<pass>``: the file name of a step without its suffix."""
    return f"step_{index:02d}_{_safe(pass_name)}"


def write_step_file(out: Path, session, step, text: str, consts, loadable: bool, note: str,
                    written_params: dict, stem: str | None = None) -> dict:
    """Write one step as ``.py`` + ``.params`` (loadable) or ``.txt`` (text only); returns the
    file names for steps.json.  `stem`: the file name without suffix (default ``step_NN_<pass>``).
    OSError propagates."""
    stem = stem or step_stem(step.index, step.pass_name)
    if loadable:
        moved = any(_printed_inline(c.value) for c in consts)
        head = _header_lines(session, step, stem, True, note, scalars_moved=moved)
        body = "\n".join(head) + "\n\nSCRIPT = " + string_literal(text) + "\n" + _LOADER
        (out / f"{stem}.py").write_text(body, encoding="utf-8")
        write_params(out / f"{stem}.params", consts, written_params)
        return {"file": f"{stem}.py", "params_file": f"{stem}.params"}
    body = "\n".join(_header_lines(session, step, stem, False, note, text)) + "\n\n" + text
    (out / f"{stem}.txt").write_text(body, encoding="utf-8")
    return {"file": f"{stem}.txt", "params_file": None}


def discard_step_file(out: Path, files: dict, written_params: dict) -> None:
    """Remove a step's ``.py`` + ``.params`` written by write_step_file (it failed to load back)."""
    for name in (files.get("file"), files.get("params_file")):
        if name:
            (out / name).unlink(missing_ok=True)
    params = out / files["params_file"] if files.get("params_file") else None
    for key in [k for k, v in written_params.items() if v == params]:
        del written_params[key]


def is_exported_step(path) -> bool:
    """True for a step file written by export_trace (its first line says so)."""
    p = Path(path)
    if p.suffix != ".py" or not p.is_file():
        return False
    with open(p, encoding="utf-8", errors="replace") as f:
        return f.readline().startswith("# irviz export: step")


def load_exported(path):
    """An exported ``step_NN_<pass>.py`` (+ its sibling ``.params``) -> tvm.IRModule.

    Reads SCRIPT without running the file's code.  ExportError for a ``.txt`` (not loadable) step."""
    p = Path(path)
    try:
        src = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ExportError(f"cannot read {p}: {exc}") from exc
    if p.suffix != ".py" or "# NOT LOADABLE" in src[:4000]:
        raise ExportError(f"{p.name} is not a loadable step file",
                          hint="TVM cannot parse the script printed after this pass; "
                               "only step_NN_*.py files with a .params next to them load")
    script = None
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SCRIPT"
                                                for t in node.targets):
            script = ast.literal_eval(node.value)
    if not isinstance(script, str):
        raise ExportError(f"{p.name} has no SCRIPT = '''...''' (not an irviz step file)")
    params = p.with_suffix(".params")
    if not params.exists():
        raise ExportError(f"{params.name} is missing next to {p.name}",
                          hint="keep the .params file beside the .py file")
    try:
        return parse_script(script, load_params(params))
    except Exception as exc:
        raise ExportError(f"TVM could not parse {p.name}: {tvm_error_text(exc)}") from exc
