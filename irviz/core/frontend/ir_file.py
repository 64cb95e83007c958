"""IR files: a Python file that defines an IRModule, as the course writes them.

    irviz my_module.py           # a module-level @I.ir_module class, or get_irmodule()
    irviz my_module.py:MyModule  # one of several

Contract:
- the IRModule: a module-level ``@I.ir_module`` class, or ``get_irmodule()`` returning one
  (BlockBuilder / ``te.create_prim_func`` built); ``FILE.py:NAME`` picks a module-level IRModule or
  a function returning one;
- optional ``get_inputs()``: a tuple (numpy arrays, torch tensors or TVM tensors) for the
  function's parameters, weights included; without it irviz makes random inputs, and symbolic
  sizes then need values (``--dim m=1,n=128``);
- optional ``reference(*inputs)``: the expected output(s); a run is compared with it, and without
  one there is nothing to compare with (never a PASS);
- optional ``schedule(sch)``: a TensorIR schedule of the module (``tvm.s_tir.Schedule``), shown
  one primitive per step before the pipeline (see ``schedule_steps``).

The file runs in the engine, so functions it registers with ``tvm.register_global_func`` are live
there; opening it again (a restart, a replay) registers them again.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable

from irviz.core.errors import LoadError, RunError
from irviz.core.frontend.files import (
    FACTORY,
    exec_model_file,
    is_ir_file,
    parse_spec,
    shown_path,
)
from irviz.core.frontend.samples import is_ir_sample, samples_dir
from irviz.core.user_code import exception_line

INPUTS_FUNC = "get_inputs"
REFERENCE_FUNC = "reference"
SCHEDULE_FUNC = "schedule"


@dataclass
class IRFile:
    mod: object                       # tvm.IRModule
    spec: str
    name: str
    path: Path
    get_inputs: Callable | None = None
    reference: Callable | None = None
    schedule: Callable | None = None   # schedule(sch), stepped by frontend.schedule_steps


def ir_file_spec(spec: str):
    """(path, NAME or None) when `spec` names an IR file, else None."""
    kind, target, name = parse_spec(spec)
    if kind == "sample" and target:
        return (samples_dir() / f"{target}.py", None) if is_ir_sample(target) else None
    if kind != "file" or not target:
        return None
    path = Path(target).expanduser()
    return (path, name) if is_ir_file(path, name) else None


def load_ir_file(path, name: str | None, spec: str) -> IRFile:
    """Execute the file and take its IRModule (see the module docstring); LoadError otherwise."""
    import tvm

    path = Path(path).resolve()
    shown = shown_path(path)
    module = exec_model_file(path, shown)
    modules = {k: v for k, v in vars(module).items()
               if isinstance(v, tvm.IRModule) and not k.startswith("_")}
    if name is None and callable(getattr(module, FACTORY, None)):
        name = FACTORY
    if name is not None:
        value = getattr(module, name, None)
        if value is None:
            raise LoadError(f"{shown} has no {name}",
                            hint=_choices_hint(shown, modules))
        if callable(value) and not isinstance(value, tvm.IRModule):
            try:
                value = value()
            except Exception as e:
                raise LoadError(f"{name}() in {shown} raised {exception_line(e)}",
                                hint="run the file in plain Python to see the full error",
                                detail=traceback.format_exc()) from None
        if not isinstance(value, tvm.IRModule):
            raise LoadError(f"{name} in {shown} is {type(value).__name__}, not an IRModule",
                            hint=_choices_hint(shown, modules))
        mod = value
    elif len(modules) == 1:
        name, mod = next(iter(modules.items()))
    elif not modules:
        raise LoadError(f"{shown} defines no IRModule",
                        hint="define a module-level @I.ir_module class, or get_irmodule() returning "
                             "an IRModule (or get_model() for a PyTorch model)")
    else:
        raise LoadError(f"{shown} defines {len(modules)} IRModules: {', '.join(sorted(modules))}",
                        hint=f"pick one: {shown}:{sorted(modules)[0]}")
    return IRFile(mod=mod, spec=spec, name=path.stem if name == FACTORY else f"{path.stem}:{name}",
                  path=path, get_inputs=_optional(module, INPUTS_FUNC),
                  reference=_optional(module, REFERENCE_FUNC),
                  schedule=_optional(module, SCHEDULE_FUNC))


def _optional(module, fname: str):
    fn = getattr(module, fname, None)
    return fn if callable(fn) else None


def _choices_hint(shown: str, modules: dict) -> str:
    if modules:
        return f"IRModules in the file: {', '.join(sorted(modules))} (open {shown}:NAME)"
    return "define a module-level @I.ir_module class or get_irmodule()"


# ---------------------------------------------------------------------------------------------
# inputs


def parse_dims(text: str | None) -> dict[str, int]:
    """"m=1,n=128" -> {"m": 1, "n": 128}; LoadError naming the bad part."""
    out: dict[str, int] = {}
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        try:
            if not sep or not key.strip().isidentifier():
                raise ValueError
            out[key.strip()] = int(value)
        except ValueError:
            raise LoadError(f"bad size {part!r} in --dim", hint="write NAME=INT pairs: --dim m=1,n=128") from None
    return out


def inputs_for(ir: IRFile, mod, func: str = "main", dims: dict | None = None, seed: int = 0) -> list:
    """The file's get_inputs(), or random arrays for `func`'s parameters (symbolic sizes from
    `dims`). RunError naming the parameter or the sizes that are missing."""
    if ir is not None and ir.get_inputs is not None:
        try:
            values = ir.get_inputs()
        except Exception as e:
            raise RunError(f"get_inputs() raised {exception_line(e)}",
                           "run the file in plain Python to see the full error",
                           detail=traceback.format_exc()) from None
        values = list(values) if isinstance(values, (tuple, list)) else [values]
        check_inputs(mod, func, values)
        return values
    from irviz.core.frontend.inputs import (
        random_inputs,  # lazy: keeps tvm out of importing ir_file
    )

    return random_inputs(mod, seed=seed, func=func, dims=dims or {})


def check_inputs(mod, func: str, values: list) -> None:
    """get_inputs() against the function's parameters: count, rank, static sizes, dtype."""
    # lazy: TVM loads only when an IR file is run; telling an IR file from a model file does not need it
    from tvm import relax, tirx

    from irviz.core.tvm_compat import var_name

    params = mod[func].params
    if len(values) != len(params):
        names = ", ".join(var_name(p) for p in params)
        raise RunError(f"get_inputs() returned {len(values)} values; {func} takes {len(params)} ({names})",
                       f"return one array per parameter of {func}, in order")
    bound: dict[str, tuple[int, str]] = {}   # symbolic size -> (value, the parameter that set it)
    for p, v in zip(params, values):
        ty = p.ty
        if not isinstance(ty, relax.TensorType) or ty.shape is None:
            continue
        name = var_name(p)
        shape = tuple(int(s) for s in getattr(v, "shape", ()))
        want = ty.shape.values
        expect = ", ".join(str(d) for d in want)
        if len(shape) != len(want):
            raise RunError(f"get_inputs(): {name} has shape {shape}; {func} expects ({expect})",
                           f"give {name} the shape ({expect})")
        for d, size in zip(want, shape):
            if isinstance(d, tirx.IntImm):
                if int(d) != size:
                    raise RunError(f"get_inputs(): {name} has shape {shape}; {func} expects ({expect})",
                                   f"give {name} the shape ({expect})")
            elif isinstance(d, tirx.Var):
                first = bound.setdefault(str(d), (size, name))
                if first[0] != size:
                    raise RunError(f"get_inputs(): {name} has shape {shape}; {func} expects ({expect}) "
                                   f"with {d} = {first[0]} (from {first[1]})",
                                   f"the sizes named {d} must agree across the inputs")
        dtype = str(getattr(v, "dtype", "")).replace("torch.", "")
        if dtype and dtype != str(ty.dtype):
            raise RunError(f"get_inputs(): {name} is {dtype}; {func} expects {ty.dtype}",
                           f"convert {name} to {ty.dtype}")
