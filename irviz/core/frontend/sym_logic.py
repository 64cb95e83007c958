"""``&`` / ``|`` of torch's symbolic booleans (``operator.and_`` / ``operator.or_`` in the graph), and
``torch.sym_min`` / ``torch.sym_max`` of symbolic sizes.

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


def _extreme(node, importer, tir_name: str, pick):
    from tvm import tirx

    a, b = (_prim(v) for v in importer.retrieve_args(node)[:2])
    if a is None or b is None:
        raise TypeError(f"{node.target.__name__} of a tensor: torch makes it of sizes and numbers")
    if isinstance(a, tirx.IntImm) and isinstance(b, tirx.IntImm):
        return pick(a.value, b.value)
    if str(a.ty) != str(b.ty):  # a size (int64) against a literal the graph wrote as int32
        a, b = (v if str(v.ty) == "int64" else tirx.Cast("int64", v) for v in (a, b))
    # a size expression, as torch's sym_size is imported: slices and shapes use it as it is
    return getattr(tirx, tir_name)(a, b)


def convert_sym_min(node, importer):
    """A length capped by another (FastSpeech2's length regulator caps the expanded sequence by its
    maximum length): TIR's min of the two sizes."""
    return _extreme(node, importer, "min", min)


def convert_sym_max(node, importer):
    return _extreme(node, importer, "max", max)
