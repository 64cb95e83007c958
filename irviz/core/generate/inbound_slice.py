"""``aten.slice`` whose end is a run-time size that torch proved in bounds, imported with that size.

The decode program that reads only the filled part of the cache slices each cache tensor to
``position + 1`` positions, a size read from the position's value (``item``). torch checks the
bound (``torch._check(p < max_len)``) and sizes the slice exactly ``p + 1``. TVM 0.27's slice
converter cannot know the bound: it emits ``strided_slice(..., assume_inbound=False)``, typed
``min(p + 1, max_len)``, and FuseOps then fails ("Cannot find the FInferType attribute registered
to op: prim.if_then_else"). Where torch's own output size along the axis is exactly ``end - start``
(what it proved), the slice is emitted with ``assume_inbound=True``, typed ``p + 1`` as in torch;
every other slice goes to TVM's converter.
"""
from __future__ import annotations


def _expr(x):
    """The sympy expression of a SymInt (or an int as itself); None for anything else."""
    node = getattr(x, "node", None)
    if node is not None:
        return getattr(node, "expr", None)
    return x if isinstance(x, int) else None


def convert_slice(node, importer):
    from torch import fx
    from tvm import relax

    args = list(node.args) + [None] * (5 - len(node.args))
    x, dim, start, end, step = args[:5]
    dim, start, step = dim or 0, start or 0, step or 1
    if isinstance(end, fx.Node) and not isinstance(start, fx.Node) and step == 1:
        val = node.meta.get("val")
        end_val = end.meta.get("val")
        size = _expr(val.shape[dim]) if val is not None else None
        want = _expr(end_val)
        if size is not None and want is not None and (size - (want - start)) == 0:
            return importer.block_builder.emit(relax.op.strided_slice(
                importer.env[x], [dim], [start], [importer.env[end]], assume_inbound=True))
    return importer._slice(node)


CONVERTERS = {"slice.Tensor": convert_slice}
