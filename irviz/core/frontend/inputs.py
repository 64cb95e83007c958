"""What a module's functions take: the Relax functions a build can run, their symbolic sizes, and
random inputs for their parameters (an IR file without get_inputs(), a measured candidate)."""
from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from irviz.core.errors import RunError
from irviz.core.tvm_compat import var_name


def entry_functions(mod) -> list[str]:
    """The Relax functions a build can run: public (a global_symbol) and not fused ("Primitive")
    sub-functions; "main" first. A module without Relax functions: its PrimFuncs, each run alone."""
    if not any(isinstance(f, relax.Function) for f in mod.functions.values()):
        return prim_functions(mod)
    names = []
    for gv, f in mod.functions.items():
        if not isinstance(f, relax.Function):
            continue
        attrs = f.attrs if f.attrs is not None else {}
        if "Primitive" in attrs and int(attrs["Primitive"]):
            continue
        if "global_symbol" in attrs or gv.name_hint == "main":
            names.append(gv.name_hint)
    return sorted(names, key=lambda n: (n != "main", n))


def prim_functions(mod) -> list[str]:
    """The module's PrimFuncs by name, "main" first."""
    names = [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
    return sorted(names, key=lambda n: (n != "main", n))


def check_func(mod, func: str) -> None:
    """RunError naming the functions there are when `func` is not one of them (any PrimFunc can
    be run alone by name)."""
    names = entry_functions(mod)
    if func not in names and func not in prim_functions(mod):
        kind = "function" if names and names[0] in prim_functions(mod) else "Relax function"
        raise RunError(f"the module has no {kind} {func!r} to run; it has: "
                       f"{', '.join(names) or 'none'}",
                       f"pick one of them (irviz check FILE --func {names[0] if names else 'main'})")


def symbolic_sizes(mod, func: str = "main") -> list[str]:
    """The symbolic sizes in `func`'s parameter shapes, in the order they first appear."""
    out: list[str] = []
    fn = mod[func]
    if isinstance(fn, tvm.tirx.PrimFunc):
        for p in fn.params:
            for d in (p.ty.shape if isinstance(p.ty, tvm.tirx.BufferType) else ()):
                if not isinstance(d, tvm.tirx.IntImm) and str(d) not in out:
                    out.append(str(d))
        return out
    for p in fn.params:
        ty = p.ty
        if isinstance(ty, relax.TensorType) and ty.shape is not None:
            for d in ty.shape.values:
                if not isinstance(d, tvm.tirx.IntImm) and str(d) not in out:
                    out.append(str(d))
    return out


def example_dims(mod, shapes, given=None, func: str = "main") -> tuple[dict, dict]:
    """({size: value}, {size: where from}) for the symbolic sizes of `func`: `given` (--dim) first,
    then the example inputs' `shapes` matched with func's parameters in order."""
    dims = {k: int(v) for k, v in (given or {}).items()}
    source = {k: "--dim" for k in dims}
    for p, shape in zip(mod[func].params, shapes or ()):
        ty = p.ty
        if not isinstance(ty, relax.TensorType) or ty.shape is None:
            continue
        for d, s in zip(ty.shape.values, shape):
            if isinstance(d, tvm.tirx.Var) and str(d) not in dims:
                dims[str(d)] = int(s)
                source[str(d)] = "example inputs"
    return dims, source


def bind_sizes(mod, dims: dict, func: str = "main"):
    """`mod` with `func`'s symbolic sizes bound to `dims` (relax BindSymbolicVars); BuildError
    naming any size without a value."""
    from irviz.core.errors import BuildError

    sizes = symbolic_sizes(mod, func)
    missing = [s for s in sizes if s not in dims]
    if missing:
        example = ",".join(f"{m}=128" for m in missing)
        raise BuildError(f"{func} has symbolic sizes with no value: {', '.join(missing)}",
                         f"give them values (irviz check FILE --dim {example})")
    if not sizes:
        return mod
    return relax.transform.BindSymbolicVars({s: int(dims[s]) for s in sizes}, func)(mod)


def random_inputs(mod, seed: int = 0, *, func: str = "main", dims: dict | None = None,
                  given=frozenset()) -> list:
    """One random array per parameter of `func`; symbolic sizes take their values from `dims`
    (RunError listing the sizes that have none). `given`: names of parameters whose values come
    from elsewhere (weights): None in their place."""
    rng = np.random.default_rng(seed)
    dims = dims or {}
    params = mod[func].params
    made = [p for p in params if var_name(p) not in given]
    missing = sorted({str(d) for p in made if isinstance(p.ty, relax.TensorType) and p.ty.shape is not None
                      for d in p.ty.shape.values
                      if not isinstance(d, tvm.tirx.IntImm) and str(d) not in dims})
    if missing:
        example = ",".join(f"{m}=1" for m in missing)
        raise RunError(f"{func} has symbolic sizes with no value: {', '.join(missing)}",
                       f"give them values (irviz check FILE --dim {example}), or define get_inputs() "
                       "in the file; a model file's example inputs fix them too")
    arrays = []
    for p in params:
        if var_name(p) in given:
            arrays.append(None)
            continue
        ty = p.ty
        if not isinstance(ty, relax.TensorType) or ty.shape is None:
            raise RunError(f"parameter {var_name(p)} of {func} is not a tensor with a known shape ({ty})",
                           "define get_inputs() in the file to give its value")
        shape = [int(d) if isinstance(d, tvm.tirx.IntImm) else int(dims[str(d)]) for d in ty.shape.values]
        dtype = str(ty.dtype)
        if dtype.startswith("float"):
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype == "bool":
            arrays.append(rng.integers(0, 2, shape).astype(bool))
        else:
            arrays.append(rng.integers(0, 8, shape).astype(dtype))
    return arrays
