"""FoldBatchNorm: an inference batch norm after a conv2d becomes the conv's weights and a bias.

    batch_norm(conv2d(x, W))  ==  conv2d(x, W * s) + (beta - mean * s),   s = gamma / sqrt(var + eps)

with W, gamma, beta, mean and var constants (the model's bound weights). The new weight and bias are
computed here, in float64, so later steps see plain constants: LibraryDispatch and the conv rules
take the conv as any other, and the bias add is fused into its write-back. Left as it was (for
DecomposeOpsForInference to split) when any of them is not a constant (``--keep-params``), the
layouts are not NCHW/OIHW, or the norm is not over the channel axis.

TVM's FoldBatchnormToConv2D does the same with Relax ops that a FoldConstant would then evaluate;
run before LegalizeOps, that FoldConstant would also fold every other weight-only expression.
"""
from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.relax.dpl import TupleGetItemPattern, is_const, is_op, rewrite_call, wildcard

from irviz.core.passes.registry import pass_note


def _array(const) -> np.ndarray:
    return const.value.numpy().astype(np.float64)


def _folds(conv_attrs, bn_attrs) -> bool:
    return (str(conv_attrs.data_layout) == "NCHW" and str(conv_attrs.kernel_layout) == "OIHW"
            and str(conv_attrs.out_layout) in ("NCHW", "") and int(bn_attrs.axis) in (1, -3)
            and not bool(getattr(bn_attrs, "training", False)))


def fold_batch_norm():
    data, weight = wildcard(), is_const()
    conv = is_op("relax.nn.conv2d")(data, weight)
    gamma, beta, mean, var = is_const(), is_const(), is_const(), is_const()
    norm = is_op("relax.nn.batch_norm")(conv, gamma, beta, mean, var)
    pattern = TupleGetItemPattern(norm, 0)

    @tvm.transform.module_pass(opt_level=0, name="FoldBatchNorm")
    def _pass(mod, ctx):
        folded = 0

        def rewriter(expr, m):
            nonlocal folded
            conv_call, bn_call = m[conv], m[norm]
            if not _folds(conv_call.attrs, bn_call.attrs):
                return expr
            w = _array(m[weight])
            if w.dtype != np.float64 or m[weight].ty.dtype != "float32":
                return expr
            eps = float(bn_call.attrs.epsilon)
            scale = (_array(m[gamma]) if bool(bn_call.attrs.scale) else 1.0) / np.sqrt(_array(m[var]) + eps)
            shift = (_array(m[beta]) if bool(bn_call.attrs.center) else 0.0) - _array(m[mean]) * scale
            new_w = (w * scale.reshape(-1, 1, 1, 1)).astype(np.float32)
            bias = shift.astype(np.float32).reshape(1, -1, 1, 1)
            folded += 1
            out = relax.Call(conv_call.op, [m[data], relax.const(new_w)], conv_call.attrs)
            return relax.op.add(out, relax.const(bias))

        updates = {}
        for gv, func in mod.functions_items():
            if isinstance(func, relax.Function) and not (func.attrs and "Primitive" in func.attrs):
                before = folded
                new = rewrite_call(pattern, rewriter, func)
                if folded > before:  # rewrite_call may rebuild a function it changed nothing in
                    updates[gv] = new
        if not updates:
            return mod
        out = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
        for gv, func in updates.items():
            out[gv] = func
        pass_note(f"{folded} batch norm(s) folded into the conv2d before them (weights scaled, bias added)")
        return out

    return _pass
