"""Weights as parameters for the course importers (--keep-params): the constants of ``main``
that hold the model's parameters become parameters of ``main`` after its inputs.

The course's ``from_fx`` makes every weight a constant in the map functions the learner writes
(``map_param(nn_mod.weight)``), so there is no importer switch to turn that off: the constants are
found afterwards by value. A constant whose array equals a parameter's (same shape, dtype and bytes)
becomes the parameter ``p_<name>`` (``linear0.weight`` -> ``p_linear0_weight``, as TVM's
exported-program importer names them); two parameters with equal values each take one constant in
order, and a constant used again (a shared weight) takes the same parameter. Buffers (batch norm
statistics) and computed constants stay constants.
"""
from __future__ import annotations

import hashlib

import numpy as np
import tvm
from tvm import relax


def _key(arr: np.ndarray) -> tuple:
    arr = np.ascontiguousarray(arr)
    return arr.shape, str(arr.dtype), hashlib.sha1(arr.tobytes()).hexdigest()


@relax.expr_functor.mutator
class _Lift(relax.PyExprMutator):
    def __init__(self, by_key: dict):
        super().__init__()
        self.by_key = by_key          # key -> [parameter names with that value], in model order
        self.taken: dict[str, relax.Var] = {}  # parameter name -> its new Var, in order of use

    def visit_generic_const_(self, op):
        data = op.value
        names = self.by_key.get(_key(data.numpy()))
        if not names:
            return op
        free = [n for n in names if n not in self.taken]
        name = free[0] if free else names[0]
        if name not in self.taken:
            self.taken[name] = relax.Var(name, relax.TensorType(list(data.shape), str(data.dtype)))
        return self.taken[name]


def lift_params(mod: tvm.IRModule, named_params) -> tuple[tvm.IRModule, dict]:
    """(module whose main takes the weights after its inputs, {parameter name: numpy array} in
    main's order). `named_params`: (name, tensor) pairs, e.g. ``nn.Module.named_parameters()``."""
    by_key: dict[tuple, list[str]] = {}
    values: dict[str, np.ndarray] = {}
    for name, t in named_params:
        arr = np.ascontiguousarray(t.detach().cpu().numpy())
        pname = "p_" + name.replace(".", "_")
        values[pname] = arr
        by_key.setdefault(_key(arr), []).append(pname)
    main = mod["main"]
    lifter = _Lift(by_key)
    body = lifter.visit_expr(main.body)
    if not lifter.taken:
        return mod, {}
    new_main = relax.Function(list(main.params) + list(lifter.taken.values()), body, main.ret_ty,
                              main.is_pure, main.attrs)
    out = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
    out["main"] = new_main
    return out, {n: values[n] for n in lifter.taken}
