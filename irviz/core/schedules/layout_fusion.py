"""CPUFuseLayoutOps: reshape and transpose kernels marked elementwise, so FuseOps puts them into the
kernel before them instead of leaving each one a launch and a pass over memory of its own.

TVM's AnnotateTIROpPattern calls a reshape or a transpose "injective", and FuseOps never fuses an
injective op after a matmul: in a transformer every projection is followed by the reshape and
transpose that split it into heads, every attention output by the transpose back, and the reshape
from [tokens, hidden] to [1, tokens, hidden] keeps the residual add, the gelu and the attention
mask add out of the matmul before them. A kernel that only moves data (each output element one
element of its single input, at an index computed from the output's) is as good as elementwise for
fusion: after FuseTIR its block reads the matmul's result by index, and the matmul rule computes it
in the tile's write-back (reverse_compute_inline), or keeps it as a loop inside the same kernel.
A gather (an index read from another tensor) or an op with a condition (padding, concat) is not
data movement in that sense and keeps its pattern.
"""
from __future__ import annotations

import tvm
from tvm import s_tir, tirx

from irviz.core.schedules.rules import with_functions

PATTERN_ATTR = "op_pattern"  # AnnotateTIROpPattern's attribute
ELEMWISE, INJECTIVE = 0, 2  # TVM's OpPatternKind values


_FIELDS = ("a", "b", "value", "args", "indices", "condition", "true_value", "false_value")


def _reads_tensor(expr) -> bool:
    """Whether an index expression reads a tensor (TVM 0.27's Python has no expression visitor)."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, tvm.ir.TensorLoad):
            return True
        for field in _FIELDS:
            child = getattr(node, field, None)
            if isinstance(child, tvm.ir.Expr):
                stack.append(child)
            elif isinstance(child, (list, tuple, tvm.ir.Array)):
                stack.extend(c for c in child if isinstance(c, tvm.ir.Expr))
    return False


def moves_data_only(func: tirx.PrimFunc) -> bool:
    """Whether every block of `func` stores one element of its single input (no arithmetic, no
    condition, no index read from a tensor): a reshape, transpose or squeeze."""
    try:
        sch = s_tir.Schedule(func)
        blocks = [sch.get(b) for b in sch.get_child_blocks(sch.get_sblock("root"))]
    except Exception:  # no root block: an extern kernel
        return False
    inputs = [p for p in func.params if hasattr(p.ty, "shape")][:-1]
    if len(inputs) != 1 or not blocks:
        return False
    for b in blocks:
        if b.init is not None or any(iv.iter_type != tirx.IterVar.DataPar for iv in b.iter_vars):
            return False
        if not isinstance(b.body, tirx.BufferStore) or not isinstance(b.body.value, tvm.ir.TensorLoad):
            return False
        if any(_reads_tensor(i) for i in (*b.body.value.indices, *b.body.indices)):
            return False
    return True


def fuse_layout_ops():
    @tvm.ir.transform.module_pass(opt_level=0, name="CPUFuseLayoutOps")
    def _pass(mod, ctx):
        updates = {}
        for gv, func in mod.functions.items():
            if not isinstance(func, tirx.PrimFunc) or func.attrs is None or PATTERN_ATTR not in func.attrs:
                continue
            if int(func.attrs[PATTERN_ATTR]) == INJECTIVE and moves_data_only(func):
                updates[gv] = func.with_attr(PATTERN_ATTR, ELEMWISE)
        return with_functions(mod, updates)

    return _pass
