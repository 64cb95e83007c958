"""The floating-point work of one call of a TensorIR kernel, each distinct value counted once.

TVM's ``estimate_tir_flops`` walks every expression as a tree. An elementwise op inlined into its
consumer is a tree that repeats its inputs' subexpressions: ``fast_gelu``'s rational polynomial
names ``clamp(x * 0.7071, -4, 4)`` 21 times and its count reads 120 FLOPs per element, where
the compiled code (LLVM computes an equal pure subexpression once) does 30. Fused behind a
matmul with a short reduction (ConvNeXt's 96 -> 384 MLP), that tree made the kernel read 129% of
the FMA peak.

So here each stored value counts as a DAG: walked in pre-order, a subexpression structurally equal
to one already met in the same store is not counted again. Which operations count, and how the
loops multiply them, stays TVM's: the estimate of the whole function, less TVM's estimate of each
repeated occurrence times the loops around its store.
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.s_tir import SBlockRealize
from tvm.s_tir.analysis import estimate_tir_flops

__all__ = ["tir_flops"]

# the operands of each expression kind, in evaluation order (binary ops, casts, selects, ramps, lets)
_PARTS = ("a", "b", "condition", "true_value", "false_value", "value", "base", "stride", "body")


class _Opaque(Exception):
    """A statement or loop this count cannot multiply out."""


def _children(e) -> list:
    if isinstance(e, tvm.ir.Call):
        return list(e.args)
    if isinstance(e, tvm.ir.TensorLoad):
        return []  # TVM's count does not look into indices, so neither does its correction
    return [c for c in (getattr(e, n, None) for n in _PARTS) if isinstance(c, tirx.Expr)]


def _is_leaf(e) -> bool:
    return isinstance(e, (tirx.Var, tirx.IntImm, tirx.FloatImm)) or not isinstance(e, tirx.Expr)


def _alone(expr):
    """`expr` as a statement of its own, for TVM's estimate of it alone."""
    lanes = getattr(expr.ty, "lanes", 1)
    buf = tirx.decl_buffer((max(1, int(lanes)),), str(expr.ty.dtype).split("x")[0], name="flop_count")
    return tirx.BufferStore(buf, expr, [tirx.Ramp(0, 1, lanes) if lanes > 1 else 0])


def repeated_flops(value) -> float:
    """TVM's FLOPs of the subexpressions of `value` that repeat one met earlier (pre-order): what
    the tree count adds over the DAG."""
    seen: dict[int, list] = {}
    extra = 0.0
    stack = [value]
    while stack:
        e = stack.pop()
        if _is_leaf(e):
            continue
        key = tvm_ffi.structural_hash(e)
        same = seen.setdefault(key, [])
        if any(tvm_ffi.structural_equal(e, s) for s in same):
            extra += float(estimate_tir_flops(_alone(e)))
            continue
        same.append(e)
        stack.extend(reversed(_children(e)))  # left operand first: pre-order
    return extra


def _count(e) -> int | None:
    return int(e.value) if isinstance(e, tirx.IntImm) else None


def _unknown_times(body, times: int) -> float:
    """A body run an unknown number of times (a symbolic loop, a while): fine while nothing in it
    repeats, since nothing is then taken off TVM's count."""
    if _repeated_in(body, times):
        raise _Opaque(body)
    return 0.0


def _repeated_in(stmt, times: int) -> float:
    """The repeated FLOPs of every store under `stmt`, times the loops around each."""
    if isinstance(stmt, tirx.BufferStore):
        return repeated_flops(stmt.value) * times
    if isinstance(stmt, SBlockRealize):
        block = stmt.block
        return (_repeated_in(block.body, times)
                + (_repeated_in(block.init, times) if block.init is not None else 0.0))
    if isinstance(stmt, tirx.For):
        extent = _count(stmt.extent)
        step = 1 if getattr(stmt, "step", None) is None else _count(stmt.step)
        if extent is None or step is None:
            return _unknown_times(stmt.body, times)
        return _repeated_in(stmt.body, times * -(-extent // max(1, step)))
    if isinstance(stmt, tirx.SeqStmt):
        return sum(_repeated_in(x, times) for x in stmt.seq)
    if isinstance(stmt, tirx.IfThenElse):
        return (_repeated_in(stmt.then_case, times)
                + (_repeated_in(stmt.else_case, times) if stmt.else_case is not None else 0.0))
    if isinstance(stmt, (tirx.LetStmt, tirx.AttrStmt)):
        return _repeated_in(stmt.body, times)
    body = getattr(stmt, "body", None)
    if isinstance(body, tirx.Stmt):  # a while loop, or a statement kind not listed here
        return _unknown_times(body, times)
    return 0.0  # a statement with no statement inside stores nothing


def tir_flops(func: tirx.PrimFunc) -> float | None:
    """FLOPs of one call of `func`, each distinct subexpression of a stored value once; None where
    TVM cannot estimate it or a loop around a repeated value has no constant trip count."""
    try:
        tree = float(estimate_tir_flops(tvm.IRModule({"main": func})))
    except Exception:  # a construct the estimator rejects: no figure rather than a wrong one
        return None
    try:
        return tree - _repeated_in(func.body, 1)
    except (_Opaque, AttributeError):
        return None
