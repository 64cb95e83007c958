"""Which weight a kernel's argument is: followed back through the calls that make it from one weight
alone (a transpose, a re-layout) to a parameter of main.

Prefill and decode take the same weight parameters, so naming a kernel's weight by the parameter
lets one program's packing of it be matched against the other's.
"""
from __future__ import annotations


def _bindings(main) -> dict:
    from tvm import relax

    body = main.body
    blocks = body.blocks if isinstance(body, relax.SeqExpr) else []
    return {b.var: b.value for block in blocks for b in block.bindings if isinstance(b, relax.VarBinding)}


def _call_args(value) -> list | None:
    """The tensor arguments of a call_tir (or a plain call), or None for anything else."""
    from tvm import relax

    if not isinstance(value, relax.Call):
        return None
    args = list(value.args)
    if args and isinstance(args[0], relax.GlobalVar):  # call_tir(gv, (args...), ...)
        inner = args[1] if len(args) > 1 else None
        return list(inner.fields) if isinstance(inner, relax.Tuple) else ([inner] if inner is not None else [])
    return args


def weight_of(main, expr, names: list[str], bound: dict | None = None, depth: int = 8) -> str | None:
    """The name (from `names`, main's weight parameters in order after its inputs) of the one weight
    parameter `expr` is computed from through calls of a single tensor argument; None otherwise."""
    from tvm import relax

    bound = _bindings(main) if bound is None else bound
    params = list(main.params)
    first = len(params) - len(names)
    for _ in range(depth):
        for i, p in enumerate(params):
            if p.same_as(expr):
                return names[i - first] if i >= first else None
        value = bound.get(expr)
        args = _call_args(value) if value is not None else None
        tensors = [a for a in (args or []) if isinstance(a, relax.Var)]
        if not args or len(tensors) != 1 or len(tensors) != len(args):
            return None
        expr = tensors[0]
    return None


def call_args_of(main, gv) -> list | None:
    """The tensor arguments main passes to kernel `gv` when it calls it exactly once."""
    from tvm import relax

    calls = [_call_args(v) for v in _bindings(main).values()
             if isinstance(v, relax.Call) and len(v.args) > 1 and v.args[0].same_as(gv)]
    return calls[0] if len(calls) == 1 else None


def packed_widths(mod, names: list[str], suffix: str = "_weight_prepack") -> dict[str, int]:
    """{weight name: panel width} for each weight main packs into N/w x K x w panels (a `suffix`
    kernel, CPUPrepackWeights' split-off re-layout, of one weight)."""
    from tvm import relax

    main = mod["main"]
    bound = _bindings(main)
    out: dict[str, int] = {}
    for var, value in bound.items():
        if not (isinstance(value, relax.Call) and value.args and isinstance(value.args[0], relax.GlobalVar)
                and value.args[0].name_hint.endswith(suffix)):
            continue
        args = _call_args(value)
        shape = getattr(var.ty, "shape", None)
        dims = getattr(shape, "values", None)
        if not args or len(args) != 1 or dims is None or len(dims) != 3:
            continue
        name = weight_of(main, args[0], names, bound)
        if name is not None and hasattr(dims[2], "value"):
            out[name] = int(dims[2].value)
    return out
