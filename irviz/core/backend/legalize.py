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
