"""``aten.select.int`` with a negative index, and ``aten.slice.Tensor`` with a run-time end.

``select.int`` with a negative index counts from the end as torch does:

``x[:, -1]`` (the last-token pooling of SigLIP's and CLIP-like text towers) exports as
``aten.select.int(x, 1, -1)``.  TVM 0.27 imports it as ``R.take(x, R.const(-1), axis=1)`` in take's
default "fast" mode, which reads the element *before* the tensor: whatever memory lies there
(1e22, inf or NaN, different from run to run), with only a build-time warning that take "segfaults
when there are out-of-bounds indices".  The converter adds the dimension's size to a negative
index when the size is known, and otherwise asks take to wrap the index, which for
``-size <= index < 0`` is torch's rule.

``slice.Tensor`` whose start or end is a run-time value (Reformer's axial positions,
``weight[:, :cols]`` with ``cols`` from ``position_ids.max().item()``): TVM's converter emits a
``strided_slice`` that clamps the bounds, so the result's size is a ``T.if_then_else`` expression
(negative bounds count from the end), and TVM 0.27's FuseOps fails on it ("Cannot find the
FInferType attribute registered to op: prim.if_then_else").  Where torch's value ranges for the
bounds show them inside the dimension (``0 <= start <= end <= size``), no clamping can apply and
the converter asks for an in-bound slice, whose size is ``end - start``.
"""
from __future__ import annotations

from irviz.core.frontend.builtin_converters import _tvm_converter


def _dim_size(node, dim: int) -> int | None:
    val = node.args[0].meta.get("val") if hasattr(node.args[0], "meta") else None
    shape = getattr(val, "shape", None)
    if shape is None:
        return None
    try:
        size = shape[dim]
    except IndexError:
        return None
    # a SymInt converts to int as its example value: only a plain int is the size for every input
    return size if isinstance(size, int) else None


def convert_select_int(node, importer):
    """aten.select.int whose negative index counts from the end (see the module docstring)."""
    from tvm import relax

    dim = node.args[1] if len(node.args) > 1 else node.kwargs["dim"]
    index = node.args[2] if len(node.args) > 2 else node.kwargs["index"]
    if not isinstance(index, int) or index >= 0:  # nothing to fix (a run-time index: TVM's way)
        return _tvm_converter(importer, "select.int")(node)
    x = importer.env[node.args[0]]
    mode = "fast"
    size = _dim_size(node, dim)
    if size is not None:
        index += size
    else:
        mode = "wrap"
    return importer.block_builder.emit(relax.op.take(x, relax.const(index, "int64"), dim, mode=mode))


def _range(arg):
    """(lowest, highest) torch allows for an int or SymInt fx argument (None where unbounded)."""
    if isinstance(arg, int):
        return arg, arg
    val = arg.meta.get("val") if hasattr(arg, "meta") else None
    node = getattr(val, "node", None)
    try:
        vr = node.shape_env.bound_sympy(node.expr)
        lo, hi = vr.lower, vr.upper
        return (int(lo) if lo.is_finite else None), (int(hi) if hi.is_finite else None)
    except Exception:  # not a SymInt torch can bound
        return None, None


def convert_slice_tensor(node, importer):
    """aten.slice.Tensor with run-time bounds known to lie inside the dimension (docstring)."""
    from tvm import relax

    args = list(node.args) + [None] * (5 - len(node.args))
    src, dim, start, end, step = args[:5]
    dim = 0 if dim is None else dim
    start = 0 if start is None else start
    step = 1 if step is None else step
    size = _dim_size(node, dim)
    if (isinstance(start, int) and (end is None or isinstance(end, int))) or not isinstance(step, int) \
            or step < 1 or size is None:
        return _tvm_converter(importer, "slice.Tensor")(node)
    end = size if end is None else end
    if isinstance(start, int) and start < 0:  # a fixed bound counted from the end
        start = max(start + size, 0)
    if isinstance(end, int) and end < 0:
        end = max(end + size, 0)
    if isinstance(end, int):  # torch clamps a fixed end past the dimension (x[u:] exports as u:maxsize)
        end = min(end, size)
    (start_lo, start_hi), (end_lo, end_hi) = _range(start), _range(end)
    if None in (start_lo, start_hi, end_lo, end_hi) or start_lo < 0 or end_hi > size or start_hi > end_lo:
        return _tvm_converter(importer, "slice.Tensor")(node)
    x = importer.env[src]
    if dim < 0:
        dim += len(node.args[0].meta["val"].shape)
    begin = importer.env[start] if hasattr(start, "meta") else start
    stop = importer.env[end] if hasattr(end, "meta") else end
    begin, stop = (getattr(v, "value", v) for v in (begin, stop))  # PrimValue -> its PrimExpr
    return importer.block_builder.emit(
        relax.op.strided_slice(x, [dim], [begin], [stop], [step], assume_inbound=True))


CONVERTERS = {"select.int": convert_select_int, "slice.Tensor": convert_slice_tensor}
