"""IR files: a Python file that defines an IRModule, as the course writes them.

    irviz my_module.py           # a module-level @I.ir_module class, or get_irmodule()
    irviz my_module.py:MyModule  # one of several

Contract:
- the IRModule: a module-level ``@I.ir_module`` class, or ``get_irmodule()`` returning one
  (BlockBuilder / ``te.create_prim_func`` built) or a PrimFunc (a module of that one function);
  ``FILE.py:NAME`` picks a module-level IRModule or a function returning one. A module of
  PrimFuncs only runs one of them alone (``--func NAME``, default its first): see
  backend/prim_run.py;
- optional ``get_inputs()``: the function's parameters as the file defines it, weights included:
  a tuple in parameter order or a dict {parameter name: value} (numpy arrays, torch tensors or
  TVM tensors); without it irviz makes random inputs, and symbolic sizes then need values
  (``--dim m=1,n=128``). Values go to each step by parameter name: after a step binds some
  parameters (BindParams), the step's function is run with the ones it still takes;
- optional ``get_params()``: {parameter name: weight}, the weights among those parameters (the
  ``nd_params`` a chapter gives BindParams). get_inputs() may then give only the others (the data),
  and ``BindParams`` planned without ``params=`` binds these, as after ``--keep-params``;
- optional ``reference(*inputs)``: the expected output(s), called with every parameter of the
  function as the file defines it (weights included, whatever a step has bound); a run is compared
  with it, and without one there is nothing to compare with (never a PASS);
- get_inputs() and get_params() are called once per opening of the file, and every step, run,
  bisect, repro and reference() gets (a copy of) those values: a get_inputs() drawing from a
  module-level random generator is compared on the numbers that were run;
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
from irviz.core.frontend.sample_files import is_ir_sample, samples_dir
from irviz.core.user_code import CalledOnce, exception_line

INPUTS_FUNC = "get_inputs"
PARAMS_FUNC = "get_params"
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
    get_params: Callable | None = None
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
        if isinstance(value, tvm.tirx.PrimFunc):  # te.create_prim_func(...) as it is
            symbol = value.attrs.get("global_symbol") if value.attrs is not None else None
            value = tvm.IRModule({str(symbol or "main") if name == FACTORY else name: value})
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
                  path=path, get_inputs=_once(_optional(module, INPUTS_FUNC)),
                  reference=_optional(module, REFERENCE_FUNC),
                  get_params=_once(_optional(module, PARAMS_FUNC)),
                  schedule=_optional(module, SCHEDULE_FUNC))


def _optional(module, fname: str):
    fn = getattr(module, fname, None)
    return fn if callable(fn) else None


def _once(fn):
    """get_inputs() / get_params() drawn once for this opening of the file (see CalledOnce)."""
    return CalledOnce(fn) if fn is not None else None


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


def weights_of(ir: IRFile | None) -> dict | None:
    """The file's get_params() as {parameter name: numpy array}; None without one. LoadError when
    it raises or gives something else than a dict keyed by the function's parameter names."""
    if ir is None or ir.get_params is None:
        return None
    try:
        values = ir.get_params()
    except Exception as e:
        raise LoadError(f"get_params() raised {exception_line(e)}",
                        hint="run the file in plain Python to see the full error",
                        detail=traceback.format_exc()) from None
    if not isinstance(values, dict):
        raise LoadError(f"get_params() returned {type(values).__name__}, not a dict",
                        hint="return {parameter name: weight}, e.g. {'w0': w0, 'b0': b0}")
    names = _param_names(ir.mod, "main") or []
    unknown = [str(k) for k in values if str(k) not in names]
    if unknown:
        raise LoadError(f"get_params() gives {', '.join(unknown)}, which main does not take "
                        f"(its parameters: {', '.join(names) or 'none'})",
                        hint="key get_params() by the names of main's weight parameters")
    out = {str(k): _as_numpy(v) for k, v in values.items()}
    odd = [k for k, v in out.items() if v.dtype.kind not in "fiub"]
    if odd:
        raise LoadError(f"get_params(): {', '.join(odd)} {'is' if len(odd) == 1 else 'are'} not "
                        "a numeric array", hint="give each weight as a numpy array, torch tensor "
                                                "or TVM tensor")
    return out


def inputs_for(ir: IRFile | None, mod, func: str = "main", dims: dict | None = None, seed: int = 0,
               params: dict | None = None) -> list:
    """The arguments of `func` in `mod` (a step of the file's module): the values named_inputs()
    gives for the file's function, taken by parameter name, so a step whose function has bound
    some of them (BindParams) gets the rest. RunError naming what is missing or wrong."""
    named = named_inputs(ir, mod, func, dims=dims, seed=seed, params=params)
    if named is None:
        values = _positional(ir, mod, func, dims, seed)
    else:
        want = _param_names(mod, func) or []
        missing = [n for n in want if n not in named]
        if missing:
            raise RunError(f"{func} takes {', '.join(missing)} at this step, which "
                           f"{'get_inputs()' if ir is not None and ir.get_inputs else 'irviz'} does not give",
                           f"give every parameter of {func} in get_inputs() (a dict keyed by "
                           "parameter name, or a tuple in order)")
        values = [named[n] for n in want]
    if ir is not None and ir.get_inputs is not None:
        check_inputs(mod, func, values)
    return values


def named_inputs(ir: IRFile | None, mod, func: str = "main", dims: dict | None = None, seed: int = 0,
                 params: dict | None = None) -> dict | None:
    """{parameter name: value} for every parameter of `func` as the file defines it (as `mod` has
    it when the file has no such function), in order: get_inputs() by position or by name, the
    weights `params` (get_params(), or a --keep-params file) for the ones it leaves out; random
    arrays without get_inputs() (symbolic sizes from `dims` and from the weights' shapes). None
    when parameter names repeat: values can then only go by position."""
    base = defining_module(ir, mod, func)
    names = _param_names(base, func) or []
    if len(set(names)) != len(names):
        return None
    weights = {k: v for k, v in (params or {}).items() if k in names}
    if ir is not None and ir.get_inputs is not None:
        named = _given(ir, func, names, weights)
    else:
        from irviz.core.frontend.inputs import (
            random_inputs,  # lazy: keeps tvm out of importing ir_file
        )

        sizes = {**_sizes_from(base, func, weights), **(dims or {})}
        arrays = random_inputs(base, seed=seed, func=func, dims=sizes, given=set(weights))
        named = {n: a for n, a in zip(names, arrays) if a is not None}
    return {n: named[n] if n in named else weights[n] for n in names if n in named or n in weights}


def raw_inputs(ir: IRFile | None):
    """What get_inputs() returns (None without one); RunError when it raises."""
    if ir is None or ir.get_inputs is None:
        return None
    try:
        return ir.get_inputs()
    except Exception as e:
        raise RunError(f"get_inputs() raised {exception_line(e)}",
                       "run the file in plain Python to see the full error",
                       detail=traceback.format_exc()) from None


def _given(ir: IRFile, func: str, names: list[str], weights: dict) -> dict:
    """get_inputs() by parameter name: a dict as it is, a tuple in parameter order (all of them, or
    the ones the weights leave out)."""
    values = raw_inputs(ir)
    if isinstance(values, dict):
        unknown = [str(k) for k in values if str(k) not in names]
        if unknown:
            raise RunError(f"get_inputs() gives {', '.join(unknown)}, which {func} does not take "
                           f"(its parameters: {', '.join(names)})",
                           "key get_inputs() by parameter name")
        return {str(k): v for k, v in values.items()}
    values = list(values) if isinstance(values, (tuple, list)) else [values]
    if len(values) == len(names):
        return dict(zip(names, values))
    rest = [n for n in names if n not in weights]
    if weights and len(values) == len(rest):
        return dict(zip(rest, values))
    besides = (f", {len(rest)} besides the weights get_params() gives ({', '.join(rest)})"
               if weights else "")
    raise RunError(f"get_inputs() returned {len(values)} values; {func} takes {len(names)} "
                   f"({', '.join(names)}){besides}",
                   f"return one value per parameter of {func} as the file defines it, in order "
                   "(weights included), or a dict {parameter name: value}")


def _positional(ir, mod, func, dims, seed) -> list:
    if ir is not None and ir.get_inputs is not None:
        values = raw_inputs(ir)
        if isinstance(values, dict):
            raise RunError(f"get_inputs() gives a dict, but {func}'s parameter names repeat",
                           f"return a tuple, one value per parameter of {func} in order")
        values = list(values) if isinstance(values, (tuple, list)) else [values]
        names = _param_names(mod, func) or []
        if len(values) != len(names):
            raise RunError(f"get_inputs() returned {len(values)} values; {func} takes {len(names)} "
                           f"({', '.join(names)})", f"return one value per parameter of {func}, in order")
        return values
    from irviz.core.frontend.inputs import random_inputs  # lazy: see named_inputs

    return random_inputs(mod, seed=seed, func=func, dims=dims or {})


def defining_module(ir: IRFile | None, mod, func: str):
    """The module whose `func` says what the inputs are: the file's own, unless a step made it."""
    if ir is not None and _param_names(ir.mod, func) is not None:
        return ir.mod
    return mod


def _param_names(mod, func: str) -> list[str] | None:
    """`func`'s parameter names when it is a Relax function of `mod`, else None."""
    from tvm import relax  # lazy: see check_inputs

    from irviz.core.tvm_compat import var_name

    if func not in [gv.name_hint for gv in mod.get_global_vars()]:
        return None
    fn = mod[func]
    return [var_name(p) for p in fn.params] if isinstance(fn, relax.Function) else None


def _sizes_from(mod, func: str, weights: dict) -> dict[str, int]:
    """Symbolic sizes the weights fix (w0: (n, m) of shape (128, 784) gives n=128, m=784)."""
    from tvm import relax, tirx  # lazy: see check_inputs

    from irviz.core.tvm_compat import var_name

    out: dict[str, int] = {}
    for p in mod[func].params:
        w = weights.get(var_name(p))
        ty = p.ty
        if w is None or not isinstance(ty, relax.TensorType) or ty.shape is None:
            continue
        for d, size in zip(ty.shape.values, getattr(w, "shape", ())):
            if isinstance(d, tirx.Var):
                out.setdefault(str(d), int(size))
    return out


def _as_numpy(v):
    import numpy as np

    if hasattr(v, "detach"):
        return v.detach().cpu().numpy()
    if hasattr(v, "numpy") and not isinstance(v, np.ndarray):
        return v.numpy()
    return np.asarray(v)


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
