"""FastMath: the transcendental ops of a float32 model as arithmetic the CPU can vectorize.

LLVM turns `exp`, `tanh`, `erf` and `pow` in a TensorIR loop into one libm call per element
(`expf@PLT`, `erff@PLT`, `powf@PLT`), so a loop that is otherwise vectorized runs scalar there:
GPT-2's tanh GELU took 4.2 ms on a 128x3072 tensor, a third of the model. TOPI's `fast_exp`,
`fast_tanh` and `fast_erf` (polynomial and rational approximations, Cephes and Eigen, a few ulp in
float32) are plain arithmetic, and a small integer power is a chain of multiplies.

One edge differs from libm: fast_exp gives inf from x = 88.38, where exp stays finite up to 88.72
(float32's largest value); the comparison with torch then shows inf against a finite number.

Relax level, before LegalizeOps, so the step's diff shows each op it replaced and what with. Other
dtypes, and powers that are not a constant 2, 3 or 4, are left as they were.
"""
from __future__ import annotations

import tvm
from tvm import relax, te, topi

from irviz.core.passes.registry import pass_note
from irviz.core.tvm_compat import constant_array

_F32 = "float32"
_SQRT_HALF = 0.7071067811865476
_SQRT_2_OVER_PI = 0.7978845608028654


def _sigmoid(x):
    e = topi.fast_exp(topi.negative(x))
    return te.compute(x.shape, lambda *i: 1.0 / (1.0 + e(*i)), name="T_fast_sigmoid")


def _silu(x):
    s = _sigmoid(x)
    return te.compute(x.shape, lambda *i: x(*i) * s(*i), name="T_fast_silu")


def _gelu(x):
    e = topi.fast_erf(te.compute(x.shape, lambda *i: x(*i) * _SQRT_HALF, name="T_scaled"))
    return te.compute(x.shape, lambda *i: x(*i) * (0.5 + e(*i) * 0.5), name="T_fast_gelu")


def _gelu_tanh(x):
    inner = te.compute(x.shape, lambda *i: _SQRT_2_OVER_PI * (x(*i) + 0.044715 * x(*i) * x(*i) * x(*i)),
                       name="T_inner")
    t = topi.fast_tanh(inner)
    return te.compute(x.shape, lambda *i: 0.5 * x(*i) * (1.0 + t(*i)), name="T_fast_gelu_tanh")


def _power(n: int):
    def make(x):
        def body(*i):
            v = x(*i)
            out = v
            for _ in range(n - 1):
                out = out * v
            return out
        return te.compute(x.shape, body, name=f"T_power{n}")
    return make


_UNARY = {
    "relax.exp": topi.fast_exp,
    "relax.tanh": topi.fast_tanh,
    "relax.erf": topi.fast_erf,
    "relax.sigmoid": _sigmoid,
    "relax.nn.silu": _silu,
    "relax.nn.gelu": _gelu,
    "relax.nn.gelu_tanh": _gelu_tanh,
}


def _is_f32(expr) -> bool:
    ty = expr.ty
    return isinstance(ty, relax.TensorType) and ty.dtype == _F32


def _small_integer_power(exponent) -> int | None:
    """2, 3 or 4 when `exponent` is a float32 scalar constant holding it."""
    value = constant_array(exponent)
    if value is None or value.size != 1:
        return None
    v = float(value.reshape(()))
    return int(v) if v in (2.0, 3.0, 4.0) else None


@relax.expr_functor.mutator
class _Rewriter(relax.PyExprMutator):
    def __init__(self, mod):
        super().__init__(mod)
        self.replaced: dict[str, int] = {}

    def visit_call_(self, call):
        call = super().visit_call_(call)
        op = getattr(call.op, "name", None)
        if not isinstance(op, str) or not call.args or not _is_f32(call):
            return call
        make = None
        if op in _UNARY and len(call.args) == 1:
            make = _UNARY[op]
        elif op == "relax.nn.softmax":
            axis = int(call.attrs.axis)
            make = lambda x: topi.nn.fast_softmax(x, axis)
        elif op == "relax.power":
            n = _small_integer_power(call.args[1])
            make = _power(n) if n else None
            op = f"{op}(x, {n})"
        if make is None or not _is_f32(call.args[0]):
            return call
        label = op.removeprefix("relax.")
        self.replaced[label] = self.replaced.get(label, 0) + 1
        return self.builder_.call_te(make, call.args[0], primfunc_name_hint="fast_" + call.op.name.split(".")[-1])


def fast_math():
    @tvm.transform.module_pass(opt_level=0, name="FastMath")
    def _pass(mod, ctx):
        rewriter = _Rewriter(mod)
        changed = False
        for gv, func in list(mod.functions_items()):
            if isinstance(func, relax.Function) and not (func.attrs and "Primitive" in func.attrs):
                before = sum(rewriter.replaced.values())
                new = rewriter.visit_expr(func)
                if sum(rewriter.replaced.values()) != before:
                    rewriter.builder_.update_func(gv, new)
                    changed = True
        if not changed:
            return mod
        pass_note("as vector arithmetic: " + ", ".join(f"{op} x{n}" for op, n in sorted(rewriter.replaced.items())))
        return rewriter.builder_.get()

    return _pass
