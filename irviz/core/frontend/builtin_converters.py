"""irviz's own PyTorch -> Relax converters: ops TVM 0.27 cannot import, or imports wrongly.

They go to TVM's ``ExportedProgramImporter`` as a ``custom_convert_map`` (TVM's hook:
``fn(node: torch.fx.Node, importer) -> relax.Var``); where only the inputs need fixing, the fixed
inputs go to TVM's own converter. TVM's installed files are never patched.

* ``cat.default``: ``torch.cat`` skips 1-D tensors with zero elements (legacy behaviour that the
  transformers KV cache relies on: ``DynamicCache`` starts from ``torch.tensor([])`` and cats the
  4-D keys/values onto it).  Relax's ``concat`` requires operands of equal rank and rejects it
  ("Concat expects all input tensors to have same ndim").  The converter drops those empty 1-D
  operands, then emits ``R.concat`` as TVM would (or the only operand left, unchanged).  Operands
  of different dtypes (ViLT concatenates a float mask with an int64 one) are cast to torch's
  promoted dtype first; Relax requires one dtype.
* ``arange`` with a negative step, ``unfold``, ``split_with_sizes`` with run-time sizes, ``amax`` /
  ``amin``, unsorted ``topk`` and ``scatter_reduce``: ``irviz.core.frontend.model_op_converters``.
* ``add`` / ``sub`` / ``mul`` of a run-time size with a fixed one: ``model_op_converters``.
* complex tensors (``polar``, ``view_as_complex`` / ``view_as_real``, complex ``mul``, the FFT):
  float pairs, ``irviz.core.frontend.complex_converters``.
* ``index.Tensor``: torch's advanced indexing (negative indices, bool masks, index tensors that
  broadcast around sliced axes): ``irviz.core.frontend.index_converter``.
* ``cumsum.default`` / ``cumprod.default``: computed in torch's result dtype (bool and int inputs
  promote to int64; transformers builds position ids with ``mask.cumsum(-1)``).  TVM keeps the
  input dtype, and a bool cumsum fails in LLVM codegen ("MatchesCode(kDLFloat)") at build time.
* ``log``, ``exp``, ``sqrt`` and the other floating-point functions on an integer tensor: torch
  computes them in float (DeBERTa-v2 takes the log of int64 relative positions); TVM's converters
  reject integer input.  The converter casts the input to the result's dtype first.
* ``div`` (all overloads): torch's type promotion.  ``int_tensor // 2`` is an int64 floor
  division (TVM makes the 2 an int32 constant and the import fails: "Binary operators must have
  the same datatype"); ``int / int`` is a float division (TVM divides integers).  The converter
  brings both operands to the result's dtype first; an integer ``trunc`` division goes through
  float64, exact below 2**53.
* ``histc.default`` (no TVM converter): equal-width bins between ``min`` and ``max``; values
  outside are not counted, ``max`` itself falls in the last bin.  Mixture-of-experts layers count
  tokens per expert with it.
* ``grouped_mm_fallback.default`` (transformers' own op for mixture-of-experts, no TVM converter):
  rows ``offs[i-1]:offs[i]`` of the input times ``weight[i]``; rows past ``offs[-1]`` are zero.
* comparisons and ``maximum`` / ``minimum`` of bool tensors (XLM's ``mask == 0``), ``clamp`` of an
  integer tensor with one bound (SAM's resized relative positions): TVM 0.27 imports them right
  and fails to build or legalize them; ``irviz.core.frontend.lowering_converters`` writes them so
  it does not.
* ``as_strided`` with strides that are not a reshape's (Longformer's overlapping chunks): a
  ``take`` from the input's storage, ``irviz.core.frontend.strided_converters``.
* ``full`` / ``full_like`` / ``fill.Scalar`` with an infinite or NaN value (the causal mask
  ``torch.full((n, n), float("-inf")).triu(1)``): TVM imports them as ``R.full``, whose
  legalization (TVM 0.27, ``topi.full``) tests ``"float" in dtype`` on a PrimType and fails with
  "argument of type 'PrimType' is not iterable".  The converter broadcasts a scalar constant of
  torch's result dtype to the shape instead, which legalizes as any broadcast does.
* ``elu.default`` with ``scale`` / ``input_scale`` (``F.selu`` decomposes to
  ``elu(x, 1.6733, 1.0507)``, ``F.celu`` to ``elu(x, a, 1, 1/a)``): TVM 0.27's converter reads
  ``alpha`` only and drops both scales, which gives wrong numbers with no error (max abs error 0.17
  on SELU).  The converter computes torch's formula, ``scale * x`` above zero and
  ``scale * alpha * (exp(x * input_scale) - 1)`` below.
* ``item`` of a tensor that no input, weight or buffer reaches (Reformer's
  ``position_ids.max().item()`` over an ``arange``): the number itself, so sizes made from it are
  fixed; ``irviz.core.frontend.constant_item`` says why.
* ``and_`` / ``or_`` of symbolic booleans (the run-time checks of Encodec's reflect pads): no TVM
  converter; ``irviz.core.frontend.sym_logic``.
"""
from __future__ import annotations

from collections.abc import Callable

from irviz.core.frontend.constant_item import convert_item, convert_sym_size
from irviz.core.frontend.index_converter import convert_index_put as _index_put
from irviz.core.frontend.index_converter import convert_index_tensor
from irviz.core.frontend import lowering_converters, sym_logic
from irviz.core.frontend.strided_converters import convert_as_strided
from irviz.core.frontend import complex_converters as cx
from irviz.core.frontend.expr_types import expr_dtype, fx_dtype
from irviz.core.frontend import model_op_converters as model_ops


def _tvm_converter(importer, key: str):
    """TVM's own converter for `key` (the custom map replaced it in importer.convert_map)."""
    cache = importer.__dict__.setdefault("_irviz_tvm_converters", {})
    if not cache:
        cache.update(importer.create_convert_map())
    return cache[key]


def _fx_shape(arg):
    """Static shape of an fx argument from its fake tensor (None if unknown)."""
    val = getattr(arg, "meta", {}).get("val") if hasattr(arg, "meta") else None
    shape = getattr(val, "shape", None)
    if shape is None:
        return None
    try:
        return tuple(int(d) for d in shape)
    except Exception:  # symbolic dims (data-dependent ones raise torch's GuardOnDataDependentSymNode)
        return tuple(shape)


def _relax_shape(expr):
    ty = getattr(expr, "ty", None) or getattr(expr, "struct_info", None)
    shape = getattr(ty, "shape", None)
    vals = getattr(shape, "values", None)
    if vals is None:
        return None
    out = []
    for v in vals:
        try:
            out.append(int(v))
        except (TypeError, ValueError):
            out.append(str(v))
    return tuple(out)


def _is_empty_1d(fx_arg, relax_value) -> bool:
    shape = _fx_shape(fx_arg)
    if shape is None:
        shape = _relax_shape(relax_value)
    # compare ints only: a symbolic torch dim would raise GuardOnDataDependentSymNode
    return shape is not None and len(shape) == 1 and isinstance(shape[0], int) and shape[0] == 0


def convert_cat(node, importer):
    """aten.cat that skips empty 1-D operands like torch does (see the module docstring)."""
    from tvm import relax

    fx_tensors = list(node.args[0])
    values = importer.retrieve_args(node)[0]
    axis = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    keep = [v for a, v in zip(fx_tensors, values) if not _is_empty_1d(a, v)]
    if not keep:  # all empty: nothing to skip in favour of; let Relax decide
        keep = list(values)
    dtype = fx_dtype(node)  # torch promotes mixed dtypes (ViLT's float and int64 masks)
    if dtype and any(expr_dtype(v) not in ("", dtype) for v in keep):
        keep = [v if expr_dtype(v) in ("", dtype) else importer.block_builder.emit(relax.op.astype(v, dtype))
                for v in keep]
    if len(keep) == 1:
        return keep[0]
    return importer.block_builder.emit(relax.op.concat(keep, axis=axis))


def _make_scan(op_name: str):
    def convert_scan(node, importer):
        """aten.cumsum/cumprod computed in torch's result dtype.

        torch promotes bool and small integer inputs to int64 (``mask.cumsum(-1)``, used by
        transformers to build position ids); TVM's converter keeps the input dtype, so a bool
        cumsum reaches LLVM as a bool addition and the build fails.  Cast the input first.
        """
        from tvm import relax

        x = importer.env[node.args[0]]
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", None)
        if node.kwargs.get("dtype") is not None:
            dtype = str(node.kwargs["dtype"]).replace("torch.", "")
        else:
            dtype = fx_dtype(node)
        if dtype and dtype != expr_dtype(x):
            x = importer.block_builder.emit(relax.op.astype(x, dtype))
        return importer.block_builder.emit(getattr(relax.op, op_name)(x, dim, dtype or None))

    convert_scan.__name__ = f"convert_{op_name}"
    return convert_scan


convert_cumsum = _make_scan("cumsum")
convert_cumprod = _make_scan("cumprod")


# torch computes these in floating point whatever the input's dtype
FLOAT_FUNCTIONS = ("log", "log2", "log10", "log1p", "exp", "expm1", "sqrt", "rsqrt",
                   "reciprocal", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
                   "asinh", "acosh", "atanh", "sigmoid", "erf")


def _make_float_function(key: str):
    def convert_float_function(node, importer):
        """A floating-point function of an integer tensor: cast to torch's result dtype first."""
        from tvm import relax

        x_node = node.args[0]
        x = importer.env[x_node]
        dtype = fx_dtype(node)
        if not dtype or not dtype.startswith(("float", "bfloat")) or expr_dtype(x) == dtype:
            return _tvm_converter(importer, key)(node)
        importer.env[x_node] = importer.block_builder.emit(relax.op.astype(x, dtype))
        try:
            return _tvm_converter(importer, key)(node)
        finally:
            importer.env[x_node] = x

    convert_float_function.__name__ = f"convert_{key.split('.')[0]}"
    return convert_float_function


def convert_div(node, importer):
    """aten.div with torch's result dtype and rounding modes (see the module docstring)."""
    from tvm import relax

    bb = importer.block_builder
    args = importer.retrieve_args(node)
    mode = node.kwargs.get("rounding_mode", node.args[2] if len(node.args) > 2 else None)
    out = fx_dtype(node)
    if not out:
        return _tvm_converter(importer, node.target.__name__)(node)

    def as_dtype(v, dtype):
        if not isinstance(v, relax.Expr):
            return relax.const(v, dtype)
        return v if expr_dtype(v) == dtype else relax.op.astype(v, dtype)

    if mode == "trunc" and not out.startswith(("float", "bfloat")):
        a, b = (as_dtype(v, "float64") for v in args[:2])
        return bb.emit(relax.op.astype(relax.op.trunc(relax.op.divide(a, b)), out))
    a, b = (as_dtype(v, out) for v in args[:2])
    if mode is None:
        return bb.emit(relax.op.divide(a, b))
    if mode == "floor":
        return bb.emit(relax.op.floor_divide(a, b))
    if mode == "trunc":
        return bb.emit(relax.op.trunc(relax.op.divide(a, b)))
    raise ValueError(f"unknown rounding_mode {mode!r}")


def convert_histc(node, importer):
    """aten.histc: counts per equal-width bin over [min, max] (see the module docstring)."""
    from tvm import relax

    bb = importer.block_builder
    x = importer.env[node.args[0]]
    args = list(node.args[1:]) + [None] * 3
    bins = int(node.kwargs.get("bins", args[0] if args[0] is not None else 100))
    lo = float(node.kwargs.get("min", args[1] if args[1] is not None else 0))
    hi = float(node.kwargs.get("max", args[2] if args[2] is not None else 0))
    if not lo < hi:
        raise NotImplementedError(f"histc with min={lo} >= max={hi} (bins from the data's range) "
                                  "has no converter; pass min < max")
    dtype = expr_dtype(x) or "float32"
    flat = bb.emit(relax.op.reshape(x, (-1,)))
    c = lambda v: relax.const(v, dtype)
    scaled = relax.op.floor(relax.op.multiply(relax.op.subtract(flat, c(lo)), c(bins / (hi - lo))))
    index = relax.op.astype(scaled, "int64")
    index = relax.op.where(relax.op.equal(flat, c(hi)), relax.const(bins - 1, "int64"), index)
    inside = relax.op.logical_and(relax.op.greater_equal(flat, c(lo)), relax.op.less_equal(flat, c(hi)))
    index = bb.emit(relax.op.where(inside, index, relax.const(-1, "int64")))
    one_hot = relax.op.equal(relax.op.expand_dims(index, 1),
                             relax.op.arange(0, bins, 1, "int64"))
    return bb.emit(relax.op.sum(relax.op.astype(one_hot, dtype), axis=[0]))


def convert_grouped_mm_fallback(node, importer):
    """transformers::grouped_mm_fallback(input (S, K), weight (E, K, N), offs (E,)) -> (S, N)."""
    from tvm import relax

    bb = importer.block_builder
    names = ("input", "weight", "offs")
    fx_args = list(node.args) + [node.kwargs[n] for n in names[len(node.args):] if n in node.kwargs]
    x, weight, offs = (importer.env[a] for a in fx_args[:3])
    rows = _fx_shape(fx_args[0])[0]
    experts = _fx_shape(fx_args[1])[0]
    offs = relax.op.astype(offs, "int64")
    row = relax.op.expand_dims(relax.op.arange(0, rows, 1, "int64"), 1)
    # a row's expert is the number of groups that end at or before it
    expert = bb.emit(relax.op.sum(relax.op.astype(relax.op.greater_equal(row, relax.op.expand_dims(offs, 0)),
                                                  "int64"), axis=[1]))
    picked = relax.op.take(weight, relax.op.minimum(expert, relax.const(experts - 1, "int64")), axis=0)
    out = relax.op.squeeze(relax.op.matmul(relax.op.expand_dims(x, 1), picked), axis=[1])
    in_a_group = relax.op.expand_dims(relax.op.less(expert, relax.const(experts, "int64")), 1)
    dtype = expr_dtype(x) or "float32"
    return bb.emit(relax.op.where(in_a_group, out, relax.const(0, dtype)))


def _nonfinite(value) -> bool:
    import math

    return isinstance(value, float) and not math.isfinite(value)


def _make_nonfinite_full(key: str, like: bool):
    def convert_nonfinite_full(node, importer):
        """A tensor filled with inf/-inf/nan: a broadcast scalar, not R.full (see the docstring)."""
        from tvm import relax

        value = node.args[1] if len(node.args) > 1 else node.kwargs.get("fill_value",
                                                                           node.kwargs.get("value"))
        dtype = fx_dtype(node)
        if not _nonfinite(value) or not dtype or not dtype.startswith(("float", "bfloat")):
            return _tvm_converter(importer, key)(node)
        if like:
            shape = importer.env[node.args[0]].ty.shape
        else:
            size = importer.retrieve_args(node)[0]
            shape = relax.ShapeExpr(size if isinstance(size, (list, tuple)) else (size,))
        return importer.block_builder.emit(relax.op.broadcast_to(relax.const(value, dtype), shape))

    convert_nonfinite_full.__name__ = f"convert_{key.split('.')[0]}_nonfinite"
    return convert_nonfinite_full


def convert_elu(node, importer):
    """aten.elu(x, alpha, scale, input_scale) with both scales (see the module docstring)."""
    from tvm import relax

    names = ("alpha", "scale", "input_scale")
    given = list(node.args[1:]) + [None] * 3
    alpha, scale, input_scale = (float(node.kwargs.get(n, given[i] if given[i] is not None else 1.0))
                                 for i, n in enumerate(names))
    x = importer.env[node.args[0]]
    dtype = expr_dtype(x) or "float32"
    c = lambda v: relax.const(v, dtype)
    scaled = x if input_scale == 1.0 else relax.op.multiply(x, c(input_scale))
    negative = relax.op.multiply(c(scale * alpha), relax.op.subtract(relax.op.exp(scaled), c(1.0)))
    positive = x if scale == 1.0 else relax.op.multiply(x, c(scale))
    return importer.block_builder.emit(
        relax.op.where(relax.op.greater(x, c(0.0)), positive, negative))


_complex_mul = cx.make_complex_aware("mul.Tensor", _tvm_converter)

BUILTIN_CONVERTERS: dict[str, Callable] = {
    "elu.default": convert_elu,
    "full.default": _make_nonfinite_full("full.default", like=False),
    "full_like.default": _make_nonfinite_full("full_like.default", like=True),
    "fill.Scalar": _make_nonfinite_full("fill.Scalar", like=True),
    "cat.default": convert_cat,
    "index.Tensor": convert_index_tensor,
    **{key: (lambda k: lambda node, imp: _index_put(node, imp, _tvm_converter(imp, k)))(key)
       for key in ("index_put.default", "index_put_.default")},
    "cumsum.default": convert_cumsum,
    "cumprod.default": convert_cumprod,
    "histc.default": convert_histc,
    **{key: convert_div for key in ("div.Tensor", "div.Tensor_mode", "div.Scalar", "div.Scalar_mode")},
    "grouped_mm_fallback.default": convert_grouped_mm_fallback,
    "arange.start_step": lambda node, imp: model_ops.convert_arange_start_step(
        node, imp, _tvm_converter(imp, "arange.start_step")),
    "unfold.default": model_ops.convert_unfold,
    "split_with_sizes.default": lambda node, imp: model_ops.convert_split_with_sizes(
        node, imp, _tvm_converter(imp, "split_with_sizes.default")),
    "amax.default": model_ops.convert_amax,
    "amin.default": model_ops.convert_amin,
    "topk.default": model_ops.convert_topk,
    "scatter_reduce.two": model_ops.convert_scatter_reduce,
    "polar.default": cx.convert_polar,
    "view_as_complex.default": cx.convert_view_as,
    "view_as_real.default": cx.convert_view_as,
    "_fft_c2c.default": cx.convert_fft_c2c,
    "_fft_r2c.default": cx.convert_fft_r2c,
    **{key: cx.make_complex_aware(key, _tvm_converter)
       for key in ("unsqueeze.default", "_to_copy.default")},
    "mul.Tensor": lambda node, imp: model_ops.align_broadcast_operands(
        node, imp, lambda n: _complex_mul(n, imp)),
    **{key: (lambda k: lambda node, imp: model_ops.align_broadcast_operands(
        node, imp, _tvm_converter(imp, k)))(key) for key in ("add.Tensor", "sub.Tensor")},
    **{f"{name}.default": _make_float_function(f"{name}.default") for name in FLOAT_FUNCTIONS},
    **lowering_converters.converters(_tvm_converter),
    "as_strided.default": lambda node, imp: convert_as_strided(
        node, imp, _tvm_converter(imp, "as_strided.default")),
    **{key: (lambda k: lambda node, imp: convert_item(node, imp, _tvm_converter(imp, k)))(key)
       for key in ("item.default", "_local_scalar_dense.default")},
    "sym_size.int": lambda node, imp: convert_sym_size(node, imp, _tvm_converter(imp, "sym_size.int")),
    "and_": sym_logic.convert_and,
    "or_": sym_logic.convert_or,
    "sym_min": sym_logic.convert_sym_min,
    "sym_max": sym_logic.convert_sym_max,
}
