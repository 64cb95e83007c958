"""FoldBatchNorm: an inference batch norm after a conv2d becomes the conv's weights and a bias.

    batch_norm(conv2d(x, W))  ==  conv2d(x, W * s) + (beta - mean * s),   s = gamma / sqrt(var + eps)

with W, gamma, beta, mean and var constants (the model's bound weights). The new weight and bias are
computed here, in float64, so later steps see plain constants: LibraryDispatch and the conv rules
take the conv as any other, and the bias add is fused into its write-back. Left as it was (for
DecomposeOpsForInference to split) when any of them is not a constant (``--keep-params``), the conv
has other users, the layouts are not NCHW/OIHW, or the norm is not over the channel axis.

The conv's binding keeps its variable and the norm's result becomes the add, so what the FX graph's
convolution and batch norm map to carries through the step. (TVM's FoldBatchnormToConv2D builds new
bindings, and computes the weights with Relax ops that a FoldConstant would then evaluate; run
before LegalizeOps, that FoldConstant would also fold every other weight-only expression.)
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import tvm
from tvm import relax

from irviz.core.passes.registry import pass_note
from irviz.core.tvm_compat import constant_array

_CONV, _NORM = "relax.nn.conv2d", "relax.nn.batch_norm"


def _const(expr) -> np.ndarray | None:
    value = constant_array(expr)
    return None if value is None else value.astype(np.float64)


def _op(expr) -> str | None:
    return getattr(getattr(expr, "op", None), "name", None) if isinstance(expr, relax.Call) else None


def _folds(conv, norm) -> bool:
    ca, na = conv.attrs, norm.attrs
    return (str(ca.data_layout) == "NCHW" and str(ca.kernel_layout) == "OIHW"
            and str(ca.out_layout) in ("NCHW", "") and int(na.axis) in (1, -3)
            and not bool(getattr(na, "training", False)) and conv.args[1].ty.dtype == "float32")


def _plan(func) -> dict:
    """For each conv2d -> batch_norm -> [0] chain of `func` that folds: {conv var: the conv with
    scaled weights, norm var: None (dropped), result var: conv var + bias}."""
    bindings = [b for blk in func.body.blocks for b in blk.bindings if isinstance(b, relax.VarBinding)]
    uses: Counter = Counter()
    # the function's result counts: a conv it returns as well must keep its unscaled weights
    for expr in [b.value for b in bindings] + [func.body.body]:
        relax.analysis.post_order_visit(expr, lambda e: uses.update([e]) if isinstance(e, relax.Var) else None)
    value = {b.var: b.value for b in bindings}
    plan: dict = {}
    for b in bindings:
        item = b.value
        if not isinstance(item, relax.TupleGetItem) or item.index != 0:
            continue
        norm_var = item.tuple_value
        norm = value.get(norm_var)
        if _op(norm) != _NORM or uses[norm_var] != 1:
            continue
        conv_var = norm.args[0]
        conv = value.get(conv_var)
        if _op(conv) != _CONV or uses[conv_var] != 1 or not _folds(conv, norm):
            continue
        w, gamma, beta, mean, var = (_const(a) for a in (conv.args[1], *norm.args[1:5]))
        if any(a is None for a in (w, gamma, beta, mean, var)):
            continue
        scale = (gamma if bool(norm.attrs.scale) else 1.0) / np.sqrt(var + float(norm.attrs.epsilon))
        shift = (beta if bool(norm.attrs.center) else 0.0) - mean * scale
        new_conv = relax.Call(conv.op, [conv.args[0], relax.const((w * scale.reshape(-1, 1, 1, 1)).astype(np.float32))],
                              conv.attrs)
        plan[conv_var] = new_conv
        plan[norm_var] = None
        plan[b.var] = relax.op.add(conv_var, relax.const(shift.astype(np.float32).reshape(1, -1, 1, 1)))
    return plan


@relax.expr_functor.mutator
class _Folder(relax.PyExprMutator):
    def __init__(self, mod, plan):
        super().__init__(mod)
        self.plan = plan

    def visit_var_binding_(self, binding):
        if binding.var not in self.plan:
            return super().visit_var_binding_(binding)
        new = self.plan[binding.var]
        if new is None:  # the norm's tuple: nothing reads it once its item is the add
            return
        self.builder_.emit_normalized(relax.VarBinding(binding.var, self.builder_.normalize(self.visit_expr(new))))


def fold_batch_norm():
    @tvm.transform.module_pass(opt_level=0, name="FoldBatchNorm")
    def _pass(mod, ctx):
        updates, folded = {}, 0
        for gv, func in mod.functions_items():
            if not isinstance(func, relax.Function) or (func.attrs and "Primitive" in func.attrs):
                continue
            if not isinstance(func.body, relax.SeqExpr):
                continue
            plan = _plan(func)
            if plan:
                updates[gv] = _Folder(mod, plan).visit_expr(func)
                folded += sum(1 for v in plan.values() if v is None)
        if not updates:
            return mod
        out = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
        for gv, func in updates.items():
            out[gv] = func
        pass_note(f"{folded} batch norm(s) folded into the conv2d before them (weights scaled, bias added)")
        return out

    return _pass
