"""Converters for ops that transformers models use and TVM 0.27 cannot import, or imports wrongly.

* ``arange.start_step`` with a negative step (Funnel's relative positions,
  ``torch.arange(16, -16, -1)``): Relax infers ``ceil`` of the length wrongly for a negative step
  (34 elements instead of 32), so the next ``expand`` fails.  The converter emits
  ``start + step * arange(n)`` with torch's ``n = ceil((end - start) / step)``.
* ``unfold.default`` (PatchTST, PatchTSMixer: ``x.unfold(dim, size, step)``, no TVM converter):
  a ``take`` of the windows' positions along ``dim``, the window axis moved last.
* ``split_with_sizes.default`` with sizes known only at run time (JetMoE splits tokens by expert
  counts, ``x.split(counts.tolist())``): TVM adds the fx nodes as if they were ints.  The converter
  slices at the running sums of the symbolic sizes.
* ``add`` / ``sub`` / ``mul`` of a tensor whose size is a run-time sum with one of a fixed size
  (JetMoE multiplies the re-concatenated expert outputs, ``(u0 + u1 + u2 + u3, d)``, by gates
  ``(32, 1)``): Relax cannot prove the sizes equal and gives the result an unknown shape, which
  FoldConstant's ``emit_te`` rejects.  torch broadcasts only equal sizes here, so the converter
  casts the operand to the fixed size first (a ``match_cast``, checked when the model runs).
* ``amax`` / ``amin`` (Reformer's ``logsumexp``; no TVM converter): ``max`` / ``min`` over the dims.
* ``topk`` with ``sorted=False`` (mixture-of-experts routers: GLM-4-MoE, Nemotron-H): TVM accepts
  sorted output only.  torch leaves the order of unsorted output unspecified, so sorted output is
  a valid result; the converter asks for it.
* ``scatter_reduce.two`` (TAPAS segment min/max; no TVM converter): ``scatter_elements`` with the
  reduction; ``include_self=False`` first puts the reduction's identity where anything lands,
  ``mean`` is a scattered sum divided by a scattered count.
"""
from __future__ import annotations

import math

from irviz.core.frontend.expr_types import expr_dtype, expr_shape, fx_dtype



def _arg(node, i, name, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def convert_arange_start_step(node, importer, tvm_converter):
    """arange(start, end, step) with torch's length when the step is negative."""
    from tvm import relax

    start, end, step = (_arg(node, i, n, d) for i, (n, d) in
                        enumerate((("start", 0), ("end", None), ("step", 1))))
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (start, end, step))
    if not numbers or step >= 0:
        return tvm_converter(node)
    dtype = fx_dtype(node) or "int64"
    n = max(0, math.ceil((end - start) / step))
    bb = importer.block_builder
    ramp = relax.op.astype(relax.op.arange(0, n, 1, "int64"), dtype)
    return bb.emit(relax.op.add(relax.op.multiply(ramp, relax.const(step, dtype)),
                                relax.const(start, dtype)))


def convert_unfold(node, importer):
    """aten.unfold(x, dim, size, step): windows of `size` every `step` along dim, as a new last axis."""
    import numpy as np
    from tvm import relax

    x = importer.env[node.args[0]]
    dim, size, step = (int(a) for a in node.args[1:4])
    shape = expr_shape(x)
    rank = max(len(shape), 1)
    dim = dim % rank
    try:
        length = int(shape[dim]) if shape else 1
    except (TypeError, ValueError):
        raise NotImplementedError("unfold along a dimension whose size is known only at run time") from None
    count = (length - size) // step + 1
    windows = (np.arange(count)[:, None] * step + np.arange(size)[None, :]).astype("int64")
    bb = importer.block_builder
    if not shape:  # a 0-d tensor unfolds to (1,) windows of itself
        return bb.emit(relax.op.reshape(x, [1]))
    taken = bb.emit(relax.op.take(x, relax.const(windows, "int64"), axis=dim))
    order = list(range(dim + 1)) + list(range(dim + 2, rank + 1)) + [dim + 1]
    return bb.emit(relax.op.permute_dims(taken, order))


def convert_split_with_sizes(node, importer, tvm_converter):
    """aten.split_with_sizes whose sizes are symbolic (``x.split(counts.tolist())``)."""
    from tvm import relax, tirx

    sizes = importer.retrieve_args(node)[1]
    if all(isinstance(s, int) for s in sizes):
        return tvm_converter(node)
    x = importer.env[node.args[0]]
    shape = expr_shape(x)
    dim = int(_arg(node, 2, "dim", 0)) % len(shape)
    bb = importer.block_builder
    outs = []
    offset = tirx.IntImm("int64", 0)
    for s in sizes:
        s = tirx.IntImm("int64", s) if isinstance(s, int) else s
        part = bb.emit(relax.op.strided_slice(x, axes=[dim], begin=[offset], end=[offset + s],
                                              assume_inbound=True))
        want = list(shape)
        want[dim] = s
        outs.append(bb.match_cast(part, relax.TensorType(want, expr_dtype(x))))
        offset = offset + s
    return bb.emit(relax.Tuple(outs))


def align_broadcast_operands(node, importer, convert):
    """convert(node) with symbolic sizes that meet a fixed size > 1 cast to it (module docstring)."""
    from tvm import relax

    fx_args = [a for a in node.args[:2] if hasattr(a, "meta")]
    shapes = {a: expr_shape(importer.env[a]) for a in fx_args}
    if len(fx_args) < 2 or any(s is None for s in shapes.values()):
        return convert(node)
    a, b = fx_args
    saved = {}
    for this, other in ((a, b), (b, a)):
        mine, theirs = shapes[this], shapes[other]
        want = list(mine)
        for i in range(1, min(len(mine), len(theirs)) + 1):
            fixed = _static(theirs[-i])
            if _static(mine[-i]) is None and fixed is not None and fixed > 1:
                want[-i] = fixed
        if want != list(mine):
            saved[this] = importer.env[this]
            importer.env[this] = importer.block_builder.match_cast(
                saved[this], relax.TensorType(want, expr_dtype(saved[this])))
    try:
        return convert(node)
    finally:
        importer.env.update(saved)


def _static(dim):
    try:
        return int(dim)
    except (TypeError, ValueError):
        return None


def _make_extremum(op_name: str):
    def convert_extremum(node, importer):
        """aten.amax / aten.amin: max / min over `dim` (every dim when it is empty)."""
        from tvm import relax

        x = importer.env[node.args[0]]
        dims = _arg(node, 1, "dim", [])
        dims = [dims] if isinstance(dims, int) else list(dims or [])
        keep = bool(_arg(node, 2, "keepdim", False))
        return importer.block_builder.emit(getattr(relax.op, op_name)(x, dims or None, keep))

    convert_extremum.__name__ = f"convert_a{op_name}"
    return convert_extremum


convert_amax = _make_extremum("max")
convert_amin = _make_extremum("min")


def convert_topk(node, importer):
    """aten.topk, sorted output also when unsorted was asked for (its order is unspecified)."""
    from tvm import relax

    x = importer.env[node.args[0]]
    k = int(_arg(node, 1, "k", 1))
    dim = int(_arg(node, 2, "dim", -1))
    largest = bool(_arg(node, 3, "largest", True))
    return importer.block_builder.emit(
        relax.op.topk(x, k=k, axis=dim, largest=largest, ret_type="both", dtype="int64"))


_REDUCTIONS = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}


def _identity(reduce: str, dtype: str):
    import numpy as np

    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    big = float("inf") if dtype.startswith(("float", "bfloat")) else int(np.iinfo(dtype).max)
    return -big if reduce == "amax" else big


def convert_scatter_reduce(node, importer):
    """aten.scatter_reduce.two(self, dim, index, src, reduce, include_self) (module docstring)."""
    from tvm import relax

    bb = importer.block_builder
    data = importer.env[node.args[0]]
    dim = int(node.args[1])
    index = importer.env[node.args[2]]
    src = importer.env[node.args[3]]
    reduce = str(_arg(node, 4, "reduce"))
    include_self = bool(_arg(node, 5, "include_self", True))
    if reduce not in (*_REDUCTIONS, "mean"):
        raise NotImplementedError(f"scatter_reduce with reduce={reduce!r}")
    dtype = expr_dtype(data)
    if expr_dtype(src) != dtype:
        src = bb.emit(relax.op.astype(src, dtype))
    ishape, sshape = expr_shape(index), expr_shape(src)
    if [str(d) for d in ishape] != [str(d) for d in sshape]:  # torch reads src only where index is
        src = bb.emit(relax.op.strided_slice(src, axes=list(range(len(ishape))),
                                             begin=[0] * len(ishape), end=ishape))
    if reduce == "mean" and not dtype.startswith(("float", "bfloat")):
        raise NotImplementedError("scatter_reduce mean of an integer tensor (torch floor-divides)")

    def scatter(base, updates, how):
        return bb.emit(relax.op.scatter_elements(base, index, updates, axis=dim, reduction=how))

    def fill_scattered(base, value):
        # a broadcast constant, not full_like: TVM 0.27 cannot legalize R.full of inf
        filled = bb.emit(relax.op.broadcast_to(relax.const(value, dtype), src.ty.shape))
        return scatter(base, filled, "update")

    base = data if include_self else fill_scattered(data, _identity(reduce, dtype))
    if reduce != "mean":
        return scatter(base, src, _REDUCTIONS[reduce])
    total = scatter(base, src, "add")
    ones = bb.emit(relax.op.ones_like(data))
    count = ones if include_self else fill_scattered(ones, 0)
    count = scatter(count, bb.emit(relax.op.ones_like(src)), "add")
    return bb.emit(relax.op.where(relax.op.greater(count, relax.const(0, dtype)),
                                  relax.op.divide(total, relax.op.maximum(count, relax.const(1, dtype))),
                                  data))
