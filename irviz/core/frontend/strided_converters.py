"""``aten.as_strided`` with any strides: a gather from the input's storage.

Longformer makes its overlapping attention chunks with ``x.as_strided(size, stride)`` whose stride
halves one of ``x``'s (windows that share half their rows).  TVM 0.27 imports ``as_strided`` only
when it is a reshape ("as_strided with non-contiguous stride ... is not supported").

torch reads element ``i`` of the result at storage position
``storage_offset + sum(i[k] * stride[k])`` of the input's storage.  Relax has no storage, but when
the input tensor covers its storage densely (its strides are those of a contiguous tensor with the
dimensions in some order: a contiguous tensor, or a transposed or permuted one, as Longformer's is)
that storage is the input with its dimensions put in stride order, flattened.  The converter builds
that 1-D tensor and ``take``s the positions, computed from ``arange`` per dimension.  Every size,
stride and offset must be known when the model is imported, and every position must lie inside the
input's own elements; otherwise the error says which.
"""
from __future__ import annotations


def _ints(values, what: str) -> list[int]:
    try:
        return [int(v) for v in values]
    except Exception:  # a SymInt with no single value
        raise NotImplementedError(f"as_strided with a {what} known only at run time") from None


def _storage_order(shape, stride) -> list[int] | None:
    """Dimensions from outermost to innermost in storage when shape/stride cover it densely."""
    order = sorted(range(len(shape)), key=lambda k: (-stride[k], k))
    running = 1
    for k in reversed(order):
        if shape[k] != 1 and stride[k] != running:
            return None
        running *= shape[k]
    return order


def convert_as_strided(node, importer, tvm_converter):
    """aten.as_strided(x, size, stride, storage_offset) as a take from x's storage (docstring)."""
    from tvm import relax

    src = node.args[0]
    val = src.meta.get("val") if hasattr(src, "meta") else None
    if val is None:
        return tvm_converter(node)
    shape = _ints(val.shape, "input shape")
    x_stride = _ints(val.stride(), "input stride")
    x_offset = int(val.storage_offset())
    size = _ints(node.args[1] if len(node.args) > 1 else node.kwargs["size"], "size")
    stride = _ints(node.args[2] if len(node.args) > 2 else node.kwargs["stride"], "stride")
    offset = node.args[3] if len(node.args) > 3 else node.kwargs.get("storage_offset")
    offset = x_offset if offset is None else int(offset)
    order = _storage_order(shape, x_stride)
    if order is None:
        raise NotImplementedError(
            f"as_strided of a tensor that does not cover its storage densely (shape {shape}, "
            f"strides {x_stride}): its storage holds elements the graph does not have")
    numel = 1
    for d in shape:
        numel *= d
    first = offset - x_offset
    last = first + sum((n - 1) * s for n, s in zip(size, stride) if n > 0)
    if any(n == 0 for n in size) or numel == 0:
        return tvm_converter(node)
    if min(stride) < 0 or first < 0 or last >= numel:
        raise NotImplementedError(
            f"as_strided(size={size}, stride={stride}, storage_offset={offset}) reads storage "
            f"positions {first}..{last} outside the input's {numel} elements")
    bb = importer.block_builder
    x = importer.env[src]
    if order != list(range(len(shape))):
        x = bb.emit(relax.op.permute_dims(x, order))
    flat = bb.emit(relax.op.reshape(x, [numel]))
    positions = relax.const(first, "int64")
    for k, (n, s) in enumerate(zip(size, stride)):
        along = relax.op.arange(0, n * s if s else n, s if s else 1, "int64")
        if not s:
            along = relax.op.multiply(along, relax.const(0, "int64"))
        axis_shape = [1] * len(size)
        axis_shape[k] = n
        positions = relax.op.add(positions, relax.op.reshape(along, axis_shape))
    positions = bb.emit(relax.op.broadcast_to(positions, size))
    return bb.emit(relax.op.take(flat, positions, axis=0))
