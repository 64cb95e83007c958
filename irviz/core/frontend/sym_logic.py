"""``&`` / ``|`` of torch's symbolic booleans (``operator.and_`` / ``operator.or_`` in the graph).

torch.export writes the run-time checks of a reflect pad by sizes known only at run time (Encodec,
whose paddings come from ``.item()``) as ``_assert_scalar((u0 < 1600) & (u1 < 1600))``.  TVM 0.27's
ExportedProgramImporter has converters for the comparisons (each a TIR boolean bound in Relax) and
for ``_assert_scalar``, but none for ``and_`` / ``or_`` (its torch.fx importer has them), so the
import stopped there.  The converter combines the two TIR booleans into one; integers get the
bitwise operator, tensors ``bitwise_and`` / ``bitwise_or`` as ``a & b`` on tensors would.
"""
from __future__ import annotations

import operator


def _prim(value):
    """The operand as a TIR expression (a bound TIR value, a number), or None for a tensor."""
    from tvm import ir, tirx

    if isinstance(value, bool):
        return tirx.IntImm("bool", value)
    if isinstance(value, int):
        return tirx.IntImm("int64", value)
    return value if isinstance(getattr(value, "ty", None), ir.PrimType) else None


def _convert(node, importer, logical: str, bitwise, relax_name: str):
    from tvm import relax, tirx

    lhs, rhs = importer.retrieve_args(node)[:2]
    a, b = _prim(lhs), _prim(rhs)
    if a is None or b is None:
        return importer.block_builder.emit(getattr(relax.op, relax_name)(lhs, rhs))
    both_bool = str(a.ty) == "bool" and str(b.ty) == "bool"
    return importer.block_builder.emit(getattr(tirx, logical)(a, b) if both_bool else bitwise(a, b))


def convert_and(node, importer):
    return _convert(node, importer, "And", operator.and_, "bitwise_and")


def convert_or(node, importer):
    return _convert(node, importer, "Or", operator.or_, "bitwise_or")
