"""Complex tensors, which Relax has no dtype for, as float pairs: the rotary ``polar`` and the FFT.

TVM 0.27's Relax has no complex dtype, so no converter for ``polar``, ``view_as_complex``,
``view_as_real`` or the FFT ops.  irviz represents a complex tensor of shape ``S`` as the float
tensor ``S + (2,)`` holding (real, imaginary) -- exactly ``torch.view_as_real``'s layout, so
``view_as_real`` / ``view_as_complex`` cost nothing -- for the ops transformers models apply to
complex tensors:

* ``polar(abs, angle)`` (Llama-4's rotary embedding), ``mul`` (complex x complex, or x real),
  ``unsqueeze``, ``_to_copy`` from real to complex;
* ``_fft_c2c`` / ``_fft_r2c`` (FNet's ``torch.fft.fftn``): the DFT along each transformed dim as two real
  matrix products (cosine and sine tables), with torch's normalisation.

Any other op that reads or makes a complex tensor stops the import with an error naming the node
(``unsupported_complex_node``), before TVM sees it.
"""
from __future__ import annotations

# _assert_tensor_metadata only checks: TVM's converter passes the float pair through
COMPLEX_OPS = ("polar.default", "view_as_complex.default", "view_as_real.default", "mul.Tensor",
               "unsqueeze.default", "_to_copy.default", "_fft_c2c.default", "_fft_r2c.default",
               "_assert_tensor_metadata.default")
FFT_OPS = ("_fft_r2c.default", "_fft_c2r.default", "_fft_c2c.default")


def _is_complex(arg) -> bool:
    val = arg.meta.get("val") if hasattr(arg, "meta") else None
    dt = getattr(val, "dtype", None)
    return bool(dt is not None and dt.is_complex)


def _key(node) -> str:
    t = node.target
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))


def unsupported_complex_node(nodes, user_keys=()):
    """(node, reason) for the first node irviz cannot import because of complex tensors, else None.

    Ops in `user_keys` (the user's own converters) are the user's to handle."""
    for n in nodes:
        if n.op != "call_function" or _key(n) in user_keys:
            continue
        key = _key(n)
        inputs = [a for a in list(n.args) + list(n.kwargs.values()) if hasattr(a, "meta")]
        if key in FFT_OPS and key not in COMPLEX_OPS:
            return n, ("no TVM lowering for FFT: TVM has no FFT op and Relax no complex dtype; irviz "
                       "computes the forward FFTs (fft, fftn, rfft, ifft of complex input) as real "
                       "matrix products, not the complex-to-real one (irfft, hfft)")
        if (_is_complex(n) or any(_is_complex(a) for a in inputs)) and key not in COMPLEX_OPS:
            carried = ", ".join(k.split(".")[0] for k in COMPLEX_OPS)
            return n, ("Relax has no complex dtype; irviz carries complex tensors as (real, imag) "
                       f"float pairs through {carried} only, not {key.split('.')[0]}")
    return None


def _pair(bb, re, im):
    from tvm import relax

    return bb.emit(relax.op.stack([re, im], axis=-1))


def _parts(bb, z):
    from tvm import relax

    def part(i):
        return bb.emit(relax.op.squeeze(relax.op.strided_slice(z, axes=[-1], begin=[i], end=[i + 1]),
                                        axis=[-1]))
    return part(0), part(1)


def convert_polar(node, importer):
    """polar(abs, angle) = abs * (cos(angle), sin(angle))."""
    from tvm import relax

    bb = importer.block_builder
    mag, angle = (importer.env[a] for a in node.args[:2])
    return _pair(bb, relax.op.multiply(mag, relax.op.cos(angle)),
                 relax.op.multiply(mag, relax.op.sin(angle)))


def convert_view_as(node, importer):
    """view_as_complex / view_as_real: the pair layout is torch's view_as_real layout."""
    return importer.env[node.args[0]]


def make_complex_aware(key: str, tvm_converter_of):
    """A converter for `key` that handles complex operands and leaves real ones to TVM."""
    def convert(node, importer):
        if not (_is_complex(node) or any(_is_complex(a) for a in node.args)):
            return tvm_converter_of(importer, key)(node)
        return _COMPLEX[key](node, importer)

    convert.__name__ = f"convert_{key.split('.')[0]}_complex"
    return convert


def _mul(node, importer):
    from tvm import relax

    bb = importer.block_builder
    a_fx, b_fx = node.args[:2]
    a, b = (importer.env[x] if hasattr(x, "meta") else x for x in (a_fx, b_fx))
    if _is_complex(a_fx) and _is_complex(b_fx):
        (ar, ai), (br, bi) = _parts(bb, a), _parts(bb, b)
        return _pair(bb, relax.op.subtract(relax.op.multiply(ar, br), relax.op.multiply(ai, bi)),
                     relax.op.add(relax.op.multiply(ar, bi), relax.op.multiply(ai, br)))
    z, r = (a, b) if _is_complex(a_fx) else (b, a)
    dtype = str(z.ty.dtype)
    if not isinstance(r, relax.Expr):
        if isinstance(r, complex):
            raise NotImplementedError("multiplying by a complex Python number")
        return bb.emit(relax.op.multiply(z, relax.const(r, dtype)))
    if str(r.ty.dtype) != dtype:
        r = relax.op.astype(r, dtype)
    return bb.emit(relax.op.multiply(z, relax.op.expand_dims(r, -1)))


def _unsqueeze(node, importer):
    from tvm import relax

    z = importer.env[node.args[0]]
    rank = len(z.ty.shape.values) - 1  # of the complex tensor
    dim = int(node.args[1])
    dim = dim + rank + 1 if dim < 0 else dim
    return importer.block_builder.emit(relax.op.expand_dims(z, dim))


def _to_copy(node, importer):
    from tvm import relax

    x = importer.env[node.args[0]]
    if _is_complex(node.args[0]):
        if _is_complex(node):  # complex -> complex: the float pair's dtype
            return x
        raise NotImplementedError("casting a complex tensor to a real dtype")
    dtype = "float64" if "complex128" in str(node.meta["val"].dtype) else "float32"
    x = relax.op.astype(x, dtype) if str(x.ty.dtype) != dtype else x
    return _pair(importer.block_builder, x, relax.op.zeros_like(x))


def convert_fft_c2c(node, importer):
    """_fft_c2c(z, dims, normalization, forward): a DFT per dim, as real matrix products."""
    bb = importer.block_builder
    z = importer.env[node.args[0]]
    return _dft(bb, *_parts(bb, z), list(node.args[1]), int(node.args[2]), bool(node.args[3]))


def convert_fft_r2c(node, importer):
    """_fft_r2c(x, dims, normalization, onesided): the forward DFT of a real tensor."""
    from tvm import relax

    bb = importer.block_builder
    x = importer.env[node.args[0]]
    dims = list(node.args[1])
    out = _dft(bb, x, bb.emit(relax.op.zeros_like(x)), dims, int(node.args[2]), True)
    if bool(node.args[3]):  # onesided: the last transformed dim keeps n // 2 + 1 frequencies
        rank = len(x.ty.shape.values)
        last = dims[-1] % rank
        keep = int(x.ty.shape.values[last]) // 2 + 1
        out = bb.emit(relax.op.strided_slice(out, axes=[last], begin=[0], end=[keep]))
    return out


def _dft(bb, re, im, dims, norm, forward):
    import numpy as np
    from tvm import relax

    shape = [int(d) for d in re.ty.shape.values]
    rank = len(shape)
    dtype = str(re.ty.dtype)
    for d in dims:
        d = d % rank
        n = shape[d]
        angle = 2 * np.pi * np.outer(np.arange(n), np.arange(n)) / n
        scale = {0: 1.0, 1: 1 / np.sqrt(n), 2: 1.0 / n}[norm]
        cos = relax.const((np.cos(angle) * scale).astype(dtype))
        sin = relax.const((np.sin(angle) * scale * (1 if forward else -1)).astype(dtype))
        order = [a for a in range(rank) if a != d] + [d]
        back = [order.index(a) for a in range(rank)]
        r, i = (bb.emit(relax.op.permute_dims(p, order)) for p in (re, im))
        # forward: (r + i m)(C - i S) = (rC + mS) + i(mC - rS); inverse flips the sign of S
        new_re = relax.op.add(relax.op.matmul(r, cos), relax.op.matmul(i, sin))
        new_im = relax.op.subtract(relax.op.matmul(i, cos), relax.op.matmul(r, sin))
        re = bb.emit(relax.op.permute_dims(new_re, back))
        im = bb.emit(relax.op.permute_dims(new_im, back))
    return _pair(bb, re, im)


_COMPLEX = {"mul.Tensor": _mul, "unsqueeze.default": _unsqueeze, "_to_copy.default": _to_copy}
