"""One exported step on disk: its TVMScript with a loader (``step_NN_<pass>.py``), its tensor
constants (``.params``), or a text-only ``.txt``; and loading such a ``.py`` back.

Round trip: ``mod.script()`` prints tensor constants as ``metadata["ir.GenericConst"][k]`` and
omits them; the parser accepts them back through ``extra_vars`` in the same order (shared
NOTES.md, examples/16).  Never ``tvm.ir.save_json`` / ``script(show_meta=True)`` (both segfault
in TVM 0.27).
"""
from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

from irviz.core.errors import ExportError

__all__ = ["module_script", "parse_script", "tensor_constants_in_print_order", "metadata_count",
           "roundtrip_check", "write_step_file", "step_stem", "is_exported_step",
           "load_exported", "load_params", "jsonable"]

_CLASS_DEF_RE = re.compile(r"^    def ([A-Za-z_]\w*)\(", re.M)


def _function_print_order(mod, text: str) -> list[str]:
    names = {gv.name_hint for gv in mod.get_global_vars()}
    order = [n for n in _CLASS_DEF_RE.findall(text) if n in names]
    seen = set(order)
    return order + sorted(n for n in names if n not in seen)


def tensor_constants_in_print_order(mod, text: str | None = None) -> list:
    """The GenericConsts holding tensors, in the order ``mod.script()`` numbers them."""
    from irviz.core.tvm_compat import GenericConst, RuntimeTensor, relax

    if text is None:
        text = mod.script()
    order: list = []
    seen: set[int] = set()

    def visit(e):
        # 0-d tensors print inline as R.const(v, dtype), not as metadata entries
        if (isinstance(e, GenericConst) and isinstance(e.value, RuntimeTensor)
                and len(e.value.shape) > 0):
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


def module_script(mod) -> tuple[str, list]:
    """(``mod.script()``, tensor constants in print order)."""
    text = mod.script()
    return text, tensor_constants_in_print_order(mod, text)


def parse_script(text: str, consts) -> object:
    """TVMScript text + constants (GenericConst or tensors, print order) -> IRModule."""
    from tvm.script import from_source

    from irviz.core.tvm_compat import GenericConst, I, R, T, relax

    table = [c if isinstance(c, GenericConst) else relax.const(c) for c in consts]
    return from_source(text, extra_vars={"metadata": {"ir.GenericConst": table},
                                         "I": I, "R": R, "T": T})


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


def roundtrip_check(mod, text, consts) -> tuple[bool, str]:
    from irviz.core.tvm_compat import structural_equal

    try:
        back = parse_script(text, [c.value for c in consts])
    except Exception as exc:  # noqa: BLE001 - the parser's complaint becomes the note
        lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
        first = next((ln for ln in lines if ln.startswith("error:")), lines[0] if lines else type(exc).__name__)
        where = next((ln for ln in lines if ln.startswith("-->")), "")
        return False, f"TVM's parser rejects the printed script: {first[:200]} {where}".rstrip()
    if not structural_equal(back, mod):
        return False, "the printed script parses but is not structurally equal to the module"
    return True, ""


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


def _string_literal(text: str) -> str:
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
    return from_source(SCRIPT, extra_vars={"metadata": {"ir.GenericConst": consts},
                                           "I": I, "R": R, "T": T})


if __name__ == "__main__":
    mod = load()
    print(f"{__file__}: IRModule with {len(mod.functions)} functions: "
          + ", ".join(sorted(gv.name_hint for gv in mod.get_global_vars())))
'''


def _header_lines(session, step, stem: str, loadable: bool, note: str, text: str = "") -> list[str]:
    applied = [s.pass_name for s in session.steps[1:step.index + 1]]
    what = "the imported module" if step.index == 0 else f"the IRModule after pass {step.pass_name}"
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
                    written_params: dict) -> dict:
    """Write one step as ``.py`` + ``.params`` (loadable) or ``.txt`` (text only); returns the
    file names for steps.json.  OSError propagates."""
    stem = step_stem(step.index, step.pass_name)
    if loadable:
        body = "\n".join(_header_lines(session, step, stem, True, note))
        body += "\n\nSCRIPT = " + _string_literal(text) + "\n" + _LOADER
        (out / f"{stem}.py").write_text(body, encoding="utf-8")
        write_params(out / f"{stem}.params", consts, written_params)
        return {"file": f"{stem}.py", "params_file": f"{stem}.params"}
    body = "\n".join(_header_lines(session, step, stem, False, note, text)) + "\n\n" + text
    (out / f"{stem}.txt").write_text(body, encoding="utf-8")
    return {"file": f"{stem}.txt", "params_file": None}


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
    except Exception as exc:  # noqa: BLE001
        raise ExportError(f"TVM could not parse {p.name}: {exc}") from exc
