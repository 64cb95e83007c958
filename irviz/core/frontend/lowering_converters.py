"""Ops TVM 0.27 imports right but cannot lower for bool or integer tensors: the same numbers,
written so that legalization and code generation accept them.

* **Comparisons and** ``maximum`` / ``minimum`` **of bool tensors.**  TVM's LLVM code generator
  takes every comparison whose operands are not int or uint for a float one: ``R.equal`` /
  ``R.not_equal`` of two bool tensors reaches LLVM as ``fcmp oeq i1`` and the build fails ("LLVM
  module verification failed: Invalid operand types for FCmp instruction"); ``less`` / ``greater``
  / ``maximum`` / ``minimum`` on bool fail the check ``t.MatchesCode(kDLFloat)``.  XLM and FlauBERT
  build their attention mask with ``(mask == 0)`` on a bool mask.  The converters cast bool tensor
  operands to int32 (float32 against a float scalar; bool scalars become 0 / 1) and give them to
  TVM's own converter, whose result is bool for a comparison; ``maximum`` / ``minimum`` of two
  bools are cast back to bool.
* ``clamp`` **of an integer tensor with one bound** (``F.interpolate``'s bilinear decomposition
  clamps its int64 source indices with ``clamp(i, None, n - 1)``; SAM's relative positions).  TVM's
  converter puts ``-inf`` / ``inf`` for the missing bound, and legalizing ``R.clip`` of an integer
  tensor converts that bound to the integer dtype: "Cannot convert infinity to BigInt".  The
  converter writes the clamp as ``maximum`` / ``minimum`` with the given bounds only, as constants
  of the tensor's dtype.
"""
from __future__ import annotations

from irviz.core.frontend.expr_types import expr_dtype, fx_dtype

COMPARISONS = ("eq", "ne", "lt", "gt", "le", "ge")
EXTREMA = ("maximum.default", "minimum.default")
CLAMPS = ("clamp.default", "clamp_min.default", "clamp_max.default")


def _make_bool_operands(key: str, tvm_converter):
    def convert_bool_operands(node, importer):
        """TVM's converter for `key` with bool tensor operands cast to int32 (module docstring)."""
        from tvm import relax

        operands = [a for a in node.args[:2] if hasattr(a, "meta") and a in importer.env]
        bools = [a for a in operands if expr_dtype(importer.env[a]) == "bool"]
        convert = tvm_converter(importer, key)
        if not bools:
            return convert(node)
        # against a float scalar torch compares in float (mask == 0.5 is False everywhere)
        to = "float32" if any(isinstance(a, float) for a in node.args[:2]) else "int32"
        saved = {a: importer.env[a] for a in bools}
        for a in bools:
            importer.env[a] = importer.block_builder.emit(relax.op.astype(saved[a], to))
        try:
            out = convert(node)
        finally:
            importer.env.update(saved)
        if key in EXTREMA and len(bools) == len(operands) and expr_dtype(out) != "bool":
            out = importer.block_builder.emit(relax.op.astype(out, "bool"))
        return out

    convert_bool_operands.__name__ = f"convert_{key.split('.')[0]}_bool"
    return convert_bool_operands


def _bounds(node, key: str):
    """(min, max) of a clamp node as given (None where not given)."""
    args = list(node.args[1:]) + [None, None]
    if key == "clamp_min.default":
        return (args[0] if args[0] is not None else node.kwargs.get("min")), None
    if key == "clamp_max.default":
        return None, (args[0] if args[0] is not None else node.kwargs.get("max"))
    lo = args[0] if len(node.args) > 1 else node.kwargs.get("min")
    hi = args[1] if len(node.args) > 2 else node.kwargs.get("max")
    return lo, hi


def _usable_int_bound(value) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def _make_int_clamp(key: str, tvm_converter):
    def convert_int_clamp(node, importer):
        """clamp of an integer tensor with scalar bounds as maximum / minimum (module docstring)."""
        from tvm import relax

        x = importer.env[node.args[0]]
        dtype = expr_dtype(x)
        lo, hi = _bounds(node, key)
        # a float bound promotes torch's result to float: only an integer result is handled here
        if (not dtype.startswith(("int", "uint")) or fx_dtype(node) != dtype
                or not (_usable_int_bound(lo) and _usable_int_bound(hi))):
            return tvm_converter(importer, key)(node)
        if lo is not None:
            x = importer.block_builder.emit(relax.op.maximum(x, relax.const(int(lo), dtype)))
        if hi is not None:
            x = importer.block_builder.emit(relax.op.minimum(x, relax.const(int(hi), dtype)))
        return x

    convert_int_clamp.__name__ = f"convert_{key.split('.')[0]}_int"
    return convert_int_clamp


def converters(tvm_converter) -> dict:
    """The converters by importer key; `tvm_converter(importer, key)` gives TVM's own."""
    keys = [f"{op}.{kind}" for op in COMPARISONS for kind in ("Tensor", "Scalar")] + list(EXTREMA)
    out = {key: _make_bool_operands(key, tvm_converter) for key in keys}
    out.update({key: _make_int_clamp(key, tvm_converter) for key in CLAMPS})
    return out
