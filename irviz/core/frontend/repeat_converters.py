"""``aten.repeat_interleave.Tensor``: the indices that repeat each position ``repeats[i]`` times.

torch.export turns ``x.repeat_interleave(repeats, dim)`` (a tensor of repeats, with or without a
dim) into this op on ``repeats`` alone, followed by ``index_select(x, dim, indices)`` (flattened
first when no dim is given). TVM 0.27 has no converter for it (FastSpeech2-Conformer's length
regulator stops there). Three cases:

* ``repeats`` a constant (a buffer, weights bound): the indices are a constant, computed now.
* ``output_size`` given: the length is that number; index ``j`` is the count of running totals
  ``cumsum(repeats)[i] <= j``.
* otherwise the length is ``sum(repeats)``, known only when the model runs: the result's size is
  a symbolic ``n`` bound from that sum at run time (``tensor_to_shape`` + ``match_cast``), the
  same way torch.export gives it an unbacked size (``u0``), and shapes that follow carry ``n``.
"""
from __future__ import annotations

import numpy as np

from irviz.core.errors import IRImportError


def _output_size(node):
    if "output_size" in node.kwargs:
        return node.kwargs["output_size"]
    return node.args[1] if len(node.args) > 1 else None


def _size_name(node) -> str:
    val = node.meta.get("val") if hasattr(node, "meta") else None
    shape = getattr(val, "shape", None)
    name = str(shape[0]) if shape is not None and len(shape) == 1 else ""
    return name if name.isidentifier() else "repeat_total"


def _lifted_value(arg, importer):
    """The value of a buffer or constant torch.export lifted to an input (bound after the
    conversion, so still a parameter here), or None."""
    ep = getattr(importer, "exported", None)
    if ep is None or getattr(arg, "op", None) != "placeholder":
        return None
    for spec in ep.graph_signature.input_specs:
        if spec.arg.name == arg.name and spec.target is not None:
            tensor = ep.state_dict.get(spec.target, ep.constants.get(spec.target))
            if tensor is None or tensor.device.type == "meta" or spec.kind.name == "PARAMETER":
                return None
            return tensor.detach().cpu().numpy()
    return None


def convert_repeat_interleave_tensor(node, importer):
    """aten.repeat_interleave.Tensor(repeats, *, output_size=None) -> int64 indices."""
    from tvm import relax, tirx

    from irviz.core.tvm_compat import constant_array

    bb = importer.block_builder
    repeats = importer.env[node.args[0]]
    output_size = _output_size(node)
    if output_size is not None and not isinstance(output_size, int):
        output_size = None  # a symbolic output_size is sum(repeats), which the run computes
    const = constant_array(repeats)
    if const is None:
        const = _lifted_value(node.args[0], importer)
    if const is not None:
        if const.ndim != 1 or (const < 0).any():
            raise IRImportError(f"repeat_interleave: repeats must be a 1-D tensor of counts >= 0, "
                                  f"got shape {const.shape} with minimum {const.min(initial=0)}",
                                  op="aten.repeat_interleave.Tensor", node=node.name)
        idx = np.repeat(np.arange(const.shape[0], dtype="int64"), const.astype("int64"))
        if output_size is not None and output_size != idx.shape[0]:
            raise IRImportError(f"repeat_interleave: output_size={output_size} but the repeats sum "
                                  f"to {idx.shape[0]}", op="aten.repeat_interleave.Tensor", node=node.name)
        return bb.emit(relax.const(idx, "int64"))
    r = bb.emit(relax.op.astype(repeats, "int64"))
    if output_size is not None:
        n = tirx.IntImm("int64", int(output_size))
    else:
        total = bb.emit(relax.op.sum(r, axis=[0], keepdims=True))
        shape = bb.emit(relax.op.tensor_to_shape(total))
        n = tirx.Var(_size_name(node), "int64")
        bb.match_cast(shape, relax.ShapeType([n]))
    totals = bb.emit(relax.op.cumsum(r, axis=0))
    positions = bb.emit(relax.op.arange(tirx.IntImm("int64", 0), n, tirx.IntImm("int64", 1), "int64"))
    # position j belongs to the first i whose running total exceeds j: the count of totals <= j
    below = bb.emit(relax.op.less_equal(relax.op.expand_dims(totals, 0), relax.op.expand_dims(positions, 1)))
    return bb.emit(relax.op.sum(relax.op.astype(below, "int64"), axis=[1]))


CONVERTERS = {"repeat_interleave.Tensor": convert_repeat_interleave_tensor}
