"""The files irviz writes for an object held in a Python session (``irviz.show`` / ``irviz.report``),
so that the app's engine, a restarted engine and ``irviz check`` can open it like any model:

- an IRModule (or a PrimFunc, a Relax function, a schedule's module): an *IR file* ``NAME.py``
  whose ``get_irmodule()`` parses the module's TVMScript back, with its tensor constants in
  ``NAME.params`` and, when inputs are given, ``get_inputs()`` / ``reference()`` reading
  ``NAME.inputs.npz``;
- a PyTorch model with example inputs, or an ExportedProgram: ``NAME.pt2`` (``torch.export.save``).

TVM and torch are imported inside the functions: the caller already holds the object, so they are
loaded by then, and importing this module loads neither.
"""
from __future__ import annotations

import re
import warnings
from pathlib import Path

from irviz.core.errors import ExportError, tvm_error_text
from irviz.core.export.step_files import (
    _first_mismatch,
    module_script,
    parse_script,
    string_literal,
    write_params,
)

__all__ = ["as_irmodule", "safe_name", "write_ir_file", "write_pt2"]


def safe_name(name: str) -> str:
    """A file stem from a Python name or a label ("My Module" -> "My_Module")."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", str(name)).strip("_") or "module"


def as_irmodule(obj):
    """The IRModule `obj` stands for, or None when it is none of: an IRModule, a TensorIR PrimFunc
    (under its global_symbol, else "main"), a Relax function (as "main"), a TensorIR schedule (its
    current module)."""
    import tvm

    if isinstance(obj, tvm.IRModule):
        return obj
    from irviz.core.tvm_compat import relax, tirx

    if isinstance(obj, tirx.PrimFunc):
        symbol = obj.attrs.get("global_symbol") if obj.attrs is not None else None
        return tvm.IRModule({str(symbol or "main"): obj})
    if isinstance(obj, relax.Function):
        return tvm.IRModule({"main": obj})
    schedule = getattr(getattr(tvm, "s_tir", None), "Schedule", None)
    if schedule is not None and isinstance(obj, schedule):
        return obj.mod
    return None


def _as_tuple(values) -> tuple:
    return tuple(values) if isinstance(values, (tuple, list)) else (values,)


_HEADER = '''\
# irviz: an IRModule given to {caller} in a Python session, written as an IR file.
# SCRIPT is its TVMScript (mod.script()).{consts}
# Open it again with:  irviz {stem}.py   (or irviz check {stem}.py)
from pathlib import Path

HERE = Path(__file__).resolve().parent

SCRIPT = {script}


def get_irmodule():
    from irviz.core.export.step_files import load_params, parse_script

    params = HERE / "{stem}.params"
    return parse_script(SCRIPT, load_params(params) if params.exists() else [])
'''

_INPUTS = '''

def _arrays(prefix):
    import numpy as np

    with np.load(HERE / "{stem}.inputs.npz") as f:
        return tuple(f[k] for k in sorted(f.files) if k.startswith(prefix))


def get_inputs():
    return _arrays("input")
'''

_REFERENCE = '''

def reference(*inputs):
    # the outputs given with these very inputs (get_inputs())
    out = _arrays("output")
    return out[0] if len(out) == 1 else out
'''


def write_ir_file(mod, folder, name: str, inputs=None, expected=None, caller: str = "irviz.show()") -> Path:
    """Write `mod` as ``folder/NAME.py`` (+ ``.params``, + ``.inputs.npz`` when `inputs` are given)
    and return the path. The written script is parsed back first: ExportError when TVM cannot
    parse what it printed; one that parses to a module that is not structurally equal is written
    with a note (and a warning) saying where it differs."""
    import numpy as np

    from irviz.core.backend.outputs import to_numpy  # lazy: TVM, which mod already needs
    from irviz.core.tvm_compat import structural_equal

    stem = safe_name(name)
    folder = Path(folder)
    text, consts = module_script(mod)
    try:
        back = parse_script(text, consts)
    except Exception as exc:
        raise ExportError(f"TVM cannot parse the TVMScript it printed for this module: {tvm_error_text(exc)}",
                          "open the module as it was before the pass that made it unprintable "
                          "(TVM 0.27 prints alloc_tensor(..., ty_args=...) after CallTIRRewrite, "
                          "which its parser rejects)") from None
    notes = ""
    if consts:
        notes += (f'\n# Its tensor constants, printed as metadata["ir.GenericConst"][k], are in {stem}.params\n'
                  "# next to this file.")
    if not structural_equal(back, mod):
        # e.g. an int32 region extent after LegalizeOps of a take printed without its dtype: the
        # file still loads, and irviz shows what it loads
        differs = ("the TVMScript TVM prints for this module parses back to a module that is not "
                   "structurally equal to it" + _first_mismatch(mod, back))
        notes += f"\n# NOTE: {differs}"
        warnings.warn(f"irviz: {differs}; irviz shows the module as parsed back", stacklevel=3)
    body = _HEADER.format(caller=caller, stem=stem, script=string_literal(text), consts=notes)
    arrays: dict = {}
    if inputs is not None:
        arrays.update({f"input{k:04d}": to_numpy(v) for k, v in enumerate(_as_tuple(inputs))})
        body += _INPUTS.format(stem=stem)
    if expected is not None:
        arrays.update({f"output{k:04d}": to_numpy(v) for k, v in enumerate(_as_tuple(expected))})
        body += _REFERENCE
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if consts:
            write_params(folder / f"{stem}.params", consts, {})
        if arrays:
            np.savez(folder / f"{stem}.inputs.npz", **arrays)
        path = folder / f"{stem}.py"
        path.write_text(body, encoding="utf-8")
    except OSError as exc:
        raise ExportError(f"cannot write to {folder}: {exc}") from exc
    return path


def write_pt2(model_or_program, inputs, folder, name: str) -> Path:
    """``folder/NAME.pt2``: an ExportedProgram as given, or `model` exported with `inputs` (a tensor
    or a tuple of them) by torch.export. A model torch.export cannot capture raises ExportError
    with torch's reason."""
    import torch

    folder = Path(folder)
    path = folder / f"{safe_name(name)}.pt2"
    # torch.export's deprecation chatter would bury what the learner asked for
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        if isinstance(model_or_program, torch.export.ExportedProgram):
            program = model_or_program
        else:
            try:
                program = torch.export.export(model_or_program, _as_tuple(inputs))
            except Exception as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise ExportError(f"torch.export could not capture {type(model_or_program).__name__}: "
                                  f"{first}", "check that the model runs on these inputs; export it "
                                  "yourself (torch.export.export) and pass the ExportedProgram") from None
        try:
            folder.mkdir(parents=True, exist_ok=True)
            torch.export.save(program, str(path))
        except OSError as exc:
            raise ExportError(f"cannot write to {folder}: {exc}") from exc
    return path
