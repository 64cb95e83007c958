"""``aten.select.int`` with a negative index, counted from the end as torch does.

``x[:, -1]`` (the last-token pooling of SigLIP's and CLIP-like text towers) exports as
``aten.select.int(x, 1, -1)``.  TVM 0.27 imports it as ``R.take(x, R.const(-1), axis=1)`` in take's
default "fast" mode, which reads the element *before* the tensor: whatever memory lies there
(1e22, inf or NaN, different from run to run), with only a build-time warning that take "segfaults
when there are out-of-bounds indices".  The converter adds the dimension's size to a negative
index when the size is known, and otherwise asks take to wrap the index, which for
``-size <= index < 0`` is torch's rule.
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

CONVERTERS = {"select.int": convert_select_int}
