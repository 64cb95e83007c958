"""Legalizations TVM 0.27 lacks, for the ops irviz's own passes emit.

``R.ewise_fma`` (the course's EwiseFMA pass) has none in TVM; :data:`CUSTOM_LEGALIZE_MAP` supplies
one, and every LegalizeOps irviz runs (the pass, the build's step, the measured TensorIR side)
passes it, so ``EwiseFMA -> LegalizeOps`` builds.
"""
from __future__ import annotations

from tvm import relax, te


def te_ewise_fma(a, b, c):
    return te.compute(a.shape, lambda *i: a(*i) * b(*i) + c(*i), name="ewise_fma")


def legalize_ewise_fma(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    """FLegalize for relax.ewise_fma: a * b + c as one TE compute."""
    return bb.call_te(te_ewise_fma, *call.args, primfunc_name_hint="ewise_fma")


CUSTOM_LEGALIZE_MAP = {"relax.ewise_fma": legalize_ewise_fma}


def ops_needing_custom_legalize(mod) -> list[str]:
    """The ops of CUSTOM_LEGALIZE_MAP still called in ``mod``'s Relax functions: plain
    ``tvm.compile(mod)`` fails on them, irviz's build lowers them itself."""
    found: set[str] = set()

    def visit(e):
        op = getattr(e, "op", None) if isinstance(e, relax.Call) else None
        name = getattr(op, "name", None)
        if name in CUSTOM_LEGALIZE_MAP:
            found.add(name)

    for f in mod.functions.values():
        if isinstance(f, relax.Function):
            relax.analysis.post_order_visit(f, visit)
    return sorted(found)
