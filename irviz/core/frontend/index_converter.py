"""``aten.index.Tensor`` (``x[i]``, ``x[:, i, j]``, ``x[mask]``) as torch defines it.

TVM 0.27's converter handles one index tensor, or index tensors on every leading axis; with a
sliced axis before or between them it replaces the slice by an ``arange`` shaped ``(n, 1, ...)``
that does not broadcast with the other indices ("cannot broadcast index shapes 16 vs 9": the
``F.unfold`` of ConvBERT and MobileViT-v2 decomposes to ``x[:, :, rows (9, 16, 1, 1), cols
(1, 1)]``).  A bool mask (X-MOD's ``hidden[lang_ids == k]``) reaches ``take`` and fails ("Take op
requires integer indices").  And torch counts a negative index from the end of its dimension
(Falcon's ``qkv[..., [-2], :]``) where ``take`` reads before the tensor, with no error.

This converter follows torch's rules (numpy's advanced indexing):

* a bool mask over ``k`` axes is the ``k`` integer index tensors of its ``nonzero()`` (its length
  is known only at run time: a symbolic dimension);
* negative integer indices get the dimension's size added;
* the index tensors broadcast together to one shape ``B``;  the indexed axes are moved to the
  front and gathered at once with ``index_tensor`` (shape ``B + other axes``), then ``B`` goes back
  where the indexed axes were when they were adjacent (else it stays in front, as in torch).
"""
from __future__ import annotations

from irviz.core.frontend.expr_types import expr_dtype, expr_shape


def _known_nonnegative(value) -> bool:
    from irviz.core.tvm_compat import GenericConst

    if isinstance(value, GenericConst):
        try:
            return bool((value.data.numpy() >= 0).all())
        except Exception:  # unknown: fix it up to be safe
            return False
    return False


def _static(dim):
    try:
        return int(dim)
    except (TypeError, ValueError):
        return None


def _broadcast_shape(shapes):
    """numpy broadcast of shapes whose entries are ints or symbolic dims (None if unprovable)."""
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        sizes = {_static(d) for d in dims}
        big = [d for d in dims if _static(d) != 1]
        if not big:
            out.append(dims[0])
        elif None not in sizes and len(sizes - {1}) == 1:
            out.append(big[0])
        elif len({str(d) for d in big}) == 1:
            out.append(big[0])
        else:
            return None
    return out


def _mask_to_indices(importer, mask, k):
    """The k int64 index tensors of a bool mask over k axes (its nonzero(), a run-time length).

    Cached per mask, so ``x[mask]`` and ``out[mask] = ...`` share one symbolic length."""
    from tvm import relax, tirx

    cache = importer.__dict__.setdefault("_irviz_mask_indices", {})
    if mask in cache:
        return cache[mask]
    bb = importer.block_builder
    nz = bb.emit(relax.op.nonzero(mask))
    n = tirx.Var("mask_count", "int64")
    nz = bb.match_cast(nz, relax.TensorType([k, n], "int64"))
    cache[mask] = [bb.emit(relax.op.take(nz, relax.const(j, "int64"), axis=0)) for j in range(k)]
    return cache[mask]


def _is_mask(value) -> bool:
    return expr_dtype(value) in ("bool", "uint8")


def _count_from_end(bb, data, value, axis):
    """value with the size of data's `axis` added to its negative entries."""
    from tvm import relax

    dtype = expr_dtype(value)
    if _known_nonnegative(value):
        return value
    size = expr_shape(data)[axis]
    if _static(size) is not None:
        size = relax.const(int(size), dtype)
    else:  # a symbolic dimension: read it from the shape at run time
        dims = bb.emit(relax.op.shape_to_tensor(relax.op.shape_of(data)))
        size = relax.op.astype(relax.op.take(dims, relax.const(axis, "int64"), axis=0), dtype)
    return bb.emit(relax.op.where(relax.op.less(value, relax.const(0, dtype)),
                                  relax.op.add(value, size), value))


def convert_index_tensor(node, importer):
    """aten.index.Tensor(data, indices) with torch's advanced-indexing rules (module docstring)."""
    from tvm import relax

    bb = importer.block_builder
    data = importer.env[node.args[0]]
    shape = expr_shape(data)
    if shape is None:
        raise NotImplementedError("indexing a tensor of unknown rank")
    rank = len(shape)
    fx_indices = list(node.args[1])
    # expand bool masks (a mask over k axes stands for k index tensors), fix negative indices
    axes, indices = [], []
    axis = 0
    for fx_idx in fx_indices:
        if fx_idx is None:
            axis += 1
            continue
        value = importer.env[fx_idx]
        dtype = expr_dtype(value)
        if _is_mask(value):
            k = len(expr_shape(value))
            for j, idx in enumerate(_mask_to_indices(importer, value, k)):
                axes.append(axis + j)
                indices.append(idx)
            axis += k
            continue
        if not dtype.startswith(("int", "uint")):
            raise TypeError(f"index tensor of dtype {dtype}: torch indexes with integer or bool tensors")
        indices.append(_count_from_end(bb, data, value, axis) if dtype.startswith("int") else value)
        axes.append(axis)
        axis += 1
    if axis > rank:
        raise ValueError(f"too many indices ({axis}) for a tensor of rank {rank}")
    if not indices:
        return data
    if len(indices) == 1:  # one index tensor: take along its axis is exactly torch's result
        return bb.emit(relax.op.take(data, indices[0], axis=axes[0]))

    target = _broadcast_shape([expr_shape(i) for i in indices])
    if target is not None:
        indices = [i if [str(d) for d in expr_shape(i)] == [str(d) for d in target]
                   else bb.emit(relax.op.broadcast_to(i, target)) for i in indices]
    rest = [a for a in range(rank) if a not in axes]
    if axes != list(range(len(axes))):
        data = bb.emit(relax.op.permute_dims(data, axes + rest))
    out = bb.emit(relax.op.index_tensor(data, indices))
    adjacent = axes == list(range(axes[0], axes[0] + len(axes)))
    first = axes[0]
    if adjacent and first > 0:  # torch puts the indexed block where the indexed axes were
        nb = len(expr_shape(out)) - len(rest)
        order = [nb + i for i in range(first)] + list(range(nb)) + [nb + i for i in range(first, len(rest))]
        out = bb.emit(relax.op.permute_dims(out, order))
    return out


def convert_index_put(node, importer, tvm_converter):
    """aten.index_put(data, indices, values, accumulate) with bool masks (``out[mask] = v``) or
    fewer index tensors than axes (JetMoE's ``out.index_add(0, idx, v)``).

    A mask becomes the integer indices of its nonzero() (the same ones ``x[mask]`` used); the
    axes after the indexed ones get aranges, as Relax's index_put wants an index per axis.  The
    rest is TVM's converter."""
    fx_indices = list(node.args[1])
    values = [None if i is None else importer.env[i] for i in fx_indices]
    rank = len(expr_shape(importer.env[node.args[0]]))
    masks = any(v is not None and _is_mask(v) for v in values)
    if not masks and (None in values or len(values) == rank):
        return tvm_converter(node)
    expanded = []
    for v in values:
        if v is not None and _is_mask(v):
            expanded += _mask_to_indices(importer, v, len(expr_shape(v)))
        else:
            expanded.append(v)
    if any(v is None for v in expanded):
        raise NotImplementedError("index_put with a bool mask after a sliced axis (x[:, mask] = v)")
    data = importer.env[node.args[0]]
    bb = importer.block_builder
    update = importer.env[node.args[2]]
    accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
    if masks and len(expanded) > 1 and all(v is not None and _is_mask(v) for v in values):
        return _put_linearized(bb, data, expanded, update, bool(accumulate))
    return _put(bb, data, expanded, update, bool(accumulate))


def _put(bb, data, expanded, update, accumulate: bool):
    """index_put with the leading axes indexed by `expanded` and an arange for each trailing one."""
    from tvm import relax

    shape = expr_shape(data)
    trailing = shape[len(expanded):]
    if trailing:  # Relax's index_put wants an index per axis: the trailing ones are aranges
        target = _broadcast_shape([expr_shape(i) for i in expanded])
        if target is None:
            raise NotImplementedError("index_put with index tensors that do not broadcast")
        nb, m = len(target), len(trailing)
        expanded = [bb.emit(relax.op.reshape(i, list(target) + [1] * m))
                    if len(expr_shape(i)) == nb else bb.emit(relax.op.reshape(
                        relax.op.broadcast_to(i, target), list(target) + [1] * m)) for i in expanded]
        for j, d in enumerate(trailing):
            arange = relax.op.arange(relax.prim_value(0), d, relax.prim_value(1), "int64")
            expanded.append(bb.emit(relax.op.reshape(arange, [1] * (nb + j) + [d] + [1] * (m - j - 1))))
    if expr_dtype(update) != expr_dtype(data):
        update = bb.emit(relax.op.astype(update, expr_dtype(data)))
    return bb.emit(relax.op.index_put(data, relax.Tuple(expanded), update, accumulate))


def _put_linearized(bb, data, indices, update, accumulate: bool):
    """index_put through one flat index over the masked axes.

    ``out[mask] = v`` with a mask over k > 1 axes gives k index tensors of the same run-time
    length, and TVM 0.27's index_put legalization compares index sizes as constants only
    ("Cannot broadcast index shapes: [(mask_count,), (mask_count,)]").  The data is reshaped to
    (elements of the masked axes, *trailing axes) for the put and back after; a mask's indices
    are never negative."""
    from tvm import relax

    shape = expr_shape(data)
    k = len(indices)
    flat, stride, leading = indices[-1], 1, shape[k - 1]
    for j in range(k - 2, -1, -1):
        stride = stride * shape[j + 1]
        leading = leading * shape[j]
        if _static(stride) is None:
            raise NotImplementedError("index_put with a bool mask over axes of run-time size")
        flat = relax.op.add(flat, relax.op.multiply(indices[j], relax.const(int(stride), "int64")))
    flat = bb.emit(flat)
    trailing = list(shape[k:])
    flat_data = bb.emit(relax.op.reshape(data, [leading] + trailing))
    if len(expr_shape(update)) > 1 + len(trailing):  # a value per element: flatten it alike
        update = bb.emit(relax.op.reshape(update, [-1] + trailing))
    out = _put(bb, flat_data, [flat], update, accumulate)
    return bb.emit(relax.op.reshape(out, shape))
