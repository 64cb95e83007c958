"""The course's teaching importer ("Import Model From PyTorch"), over the decomposed aten graph.

A BlockBuilder walk over ``captured.exported.graph``: user inputs become ``main`` parameters,
parameters/buffers become ``relax.const``, and each supported aten op is emitted with
``bb.emit_te`` + a TOPI / TE function, so every op is a ``call_tir`` to its own PrimFunc from the
start (as in the course).  Provenance is the list of vars emitted for each FX node.

Supported (static shapes, NCHW): mm, addmm, linear, matmul (2-D/3-D), bmm, relu, sigmoid, tanh,
exp, add/sub/mul/div (Tensor and Scalar), permute, t, transpose, view/reshape/_unsafe_view,
convolution/conv2d (2-D, groups=1), batch norm (inference), max_pool2d, mean, softmax, clone/alias/detach
(pass-through), getitem.
"""
from __future__ import annotations

import operator
import time

import numpy as np
from tvm import relax, te, topi

from irviz.core.errors import IRImportError, tvm_error_text
from irviz.core.frontend.imported import Imported, compute_provenance, node_message, op_name

_HINT = (
    'the course importer covers only the ops of the course samples; use importer="exported_program" '
    "(TVM's full PyTorch importer) for this model"
)


def _torch_dtype(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _shape(node):
    val = node.meta.get("val", node.meta.get("tensor_meta"))
    shape = getattr(val, "shape", None)
    if shape is None:
        return None
    import torch

    out = []
    for d in shape:
        if isinstance(d, torch.SymInt) or not str(d).lstrip("-").isdigit():
            raise _Unsupported(f"symbolic dimension {d} (the course importer needs static shapes)")
        out.append(int(d))
    return out


class _Unsupported(Exception):
    pass


# ---- TE / TOPI building blocks ------------------------------------------------------------


def _addmm(bias, a, b, beta=1, alpha=1):
    mm = topi.nn.matmul(a, b)
    if alpha != 1:
        mm = topi.multiply(mm, alpha)
    if beta != 1:
        bias = topi.multiply(bias, beta)
    return topi.add(mm, bias)


def _linear(x, w, b=None):
    return topi.nn.dense(x, w, b)


def _matmul(a, b):
    if len(a.shape) == 2 and len(b.shape) == 2:
        return topi.nn.matmul(a, b)
    if len(a.shape) == 3 and len(b.shape) == 3:
        return topi.nn.batch_matmul(a, b, transpose_b=False)
    raise _Unsupported(f"matmul of ranks {len(a.shape)} and {len(b.shape)}")


def _conv2d(x, w, b=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    y = topi.nn.conv2d(x, w, list(stride), list(padding), list(dilation), "NCHW")
    if b is not None:
        y = topi.add(y, topi.reshape(b, (1, int(b.shape[0]), 1, 1)))
    return y


def _batch_norm(x, w, b, mean, var, eps):
    def f(*i):
        c = i[1]
        y = (x(*i) - mean[c]) / te.sqrt(var[c] + te.const(eps, x.dtype))
        if w is not None:
            y = y * w[c]
        if b is not None:
            y = y + b[c]
        return y

    return te.compute(x.shape, f, name="batch_norm")


def _mean(x, axes, keepdim):
    nd = len(x.shape)
    axes = [d % nd for d in axes]
    count = 1
    for d in axes:
        count *= int(x.shape[d])
    return topi.divide(topi.sum(x, axis=axes, keepdims=keepdim), float(count))


def _relu(x):
    return topi.nn.relu(x)


# ---- the importer ---------------------------------------------------------------------------


class _CourseImporter:
    def __init__(self, ep):
        self.ep = ep
        self.bb = relax.BlockBuilder()
        self.env = {}  # fx.Node -> relax.Expr | tuple
        self.const_names = []  # (placeholder name, GenericConst)

    # helpers
    def arg(self, a):
        from torch import fx

        if isinstance(a, fx.Node):
            v = self.env[a]
            if isinstance(v, tuple):
                raise _Unsupported(f"tuple value {a.name} used as a tensor")
            return v
        return a

    def emit_te(self, fn, *args, name=None, **kwargs):
        return self.bb.emit_te(fn, *args, primfunc_name_hint=name or fn.__name__, **kwargs)

    def lifted_tensor(self, spec):
        from torch.export.graph_signature import InputKind

        ep = self.ep
        if spec.kind == InputKind.PARAMETER:
            return ep.state_dict[spec.target]
        if spec.kind == InputKind.BUFFER:
            buffers = dict(ep.named_buffers())
            return buffers[spec.target] if spec.target in buffers else ep.constants[spec.target]
        if spec.kind == InputKind.CONSTANT_TENSOR:
            return ep.constants[spec.target]
        raise _Unsupported(f"input kind {spec.kind}")

    def convert(self, node):
        t = node.target
        name = getattr(t, "__name__", str(t))  # "addmm.default"
        base = name.split(".")[0]
        a = node.args
        kw = node.kwargs
        A = self.arg
        if t is operator.getitem:
            src = self.env[a[0]]
            if isinstance(src, tuple):
                return src[a[1]]
            return self.bb.emit(relax.TupleGetItem(src, a[1]))
        if base in ("mm",):
            return self.emit_te(topi.nn.matmul, A(a[0]), A(a[1]), name="mm")
        if base == "addmm":
            return self.emit_te(_addmm, A(a[0]), A(a[1]), A(a[2]), kw.get("beta", 1), kw.get("alpha", 1),
                                name="addmm")
        if base == "linear":
            bias = A(a[2]) if len(a) > 2 and a[2] is not None else None
            return self.emit_te(_linear, A(a[0]), A(a[1]), bias, name="linear")
        if base in ("matmul", "bmm"):
            return self.emit_te(_matmul, A(a[0]), A(a[1]), name=base)
        if base == "relu":
            return self.emit_te(_relu, A(a[0]), name="relu")
        if base in ("sigmoid", "tanh", "exp"):
            return self.emit_te(getattr(topi, base), A(a[0]), name=base)
        if base in ("add", "sub", "mul", "div"):
            fn = {"add": topi.add, "sub": topi.subtract, "mul": topi.multiply, "div": topi.divide}[base]
            x, y = A(a[0]), A(a[1])
            alpha = kw.get("alpha", 1)
            if base == "div" and kw.get("rounding_mode"):
                raise _Unsupported("div with rounding_mode")
            if alpha != 1:
                return self.emit_te(lambda p, q: fn(p, topi.multiply(q, alpha)), x, y, name=base)
            if not isinstance(x, relax.Expr):  # scalar op tensor
                return self.emit_te(lambda q: fn(x, q), y, name=base)
            return self.emit_te(fn, x, y, name=base)
        if base == "permute":
            return self.emit_te(topi.transpose, A(a[0]), list(a[1]), name="transpose")
        if base in ("t", "numpy_T"):
            return self.emit_te(topi.transpose, A(a[0]), name="transpose")
        if base == "transpose":
            nd = len(_shape(a[0]))
            axes = list(range(nd))
            d0, d1 = a[1] % nd, a[2] % nd
            axes[d0], axes[d1] = axes[d1], axes[d0]
            return self.emit_te(topi.transpose, A(a[0]), axes, name="transpose")
        if base in ("view", "reshape", "_unsafe_view"):
            return self.emit_te(topi.reshape, A(a[0]), _shape(node), name="reshape")
        if base in ("clone", "alias", "detach", "contiguous", "lift_fresh_copy"):
            return A(a[0])
        if base in ("convolution", "conv2d"):
            if base == "convolution":
                x, w, b, stride, padding, dilation, transposed, _, groups = a[:9]
                if transposed:
                    raise _Unsupported("transposed convolution")
            else:
                x, w = a[0], a[1]
                b = a[2] if len(a) > 2 else None
                stride, padding, dilation = (list(a[i]) if len(a) > i else d for i, d in
                                             ((3, [1, 1]), (4, [0, 0]), (5, [1, 1])))
                groups = a[6] if len(a) > 6 else 1
            if groups != 1 or len(_shape(x)) != 4:
                raise _Unsupported("only 2-D convolution with groups=1")
            bias = A(b) if b is not None else None
            return self.emit_te(_conv2d, A(x), A(w), bias, tuple(stride), tuple(padding),
                                tuple(dilation), name="conv2d")
        if base == "_native_batch_norm_legit_no_training":
            x, w, b, mean, var, _momentum, eps = a[:7]
            out = self.emit_te(_batch_norm, A(x), A(w) if w is not None else None,
                               A(b) if b is not None else None, A(mean), A(var), float(eps),
                               name="batch_norm")
            return (out, None, None)
        if base in ("max_pool2d_with_indices", "max_pool2d"):
            kernel = _pair(a[1])
            stride = _pair(a[2]) if len(a) > 2 and a[2] else kernel
            pad = _pair(a[3]) if len(a) > 3 else [0, 0]
            dilation = _pair(a[4]) if len(a) > 4 else [1, 1]
            ceil_mode = bool(a[5]) if len(a) > 5 else False
            out = self.emit_te(topi.nn.pool2d, A(a[0]), kernel, stride, dilation,
                               [pad[0], pad[1], pad[0], pad[1]], "max", ceil_mode, "NCHW",
                               name="max_pool2d")
            return (out, None) if base == "max_pool2d_with_indices" else out
        if base == "mean" and len(a) > 1:
            keepdim = bool(a[2]) if len(a) > 2 else bool(kw.get("keepdim", False))
            return self.emit_te(_mean, A(a[0]), list(a[1]), keepdim, name="mean")
        if base in ("_softmax", "softmax"):
            return self.emit_te(topi.nn.softmax, A(a[0]), a[1], name="softmax")
        raise _NoConverter()

    def run(self, captured):
        from torch.export.graph_signature import InputKind

        ep = self.ep
        specs = {s.arg.name: s for s in ep.graph_signature.input_specs}
        nodes = list(ep.graph.nodes)
        inputs = []
        bb = self.bb
        with bb.function("main"):
            with bb.dataflow():
                out = None
                for node in nodes:
                    if node.op == "placeholder":
                        spec = specs.get(node.name)
                        if spec is None or spec.kind == InputKind.USER_INPUT:
                            val = node.meta.get("val")
                            try:
                                shape = _shape(node)
                            except _Unsupported as exc:
                                raise self._error(captured, node, str(exc)) from exc
                            var = relax.Var(node.name, relax.TensorType(shape, _torch_dtype(val.dtype)))
                            inputs.append(var)
                            self.env[node] = var
                        else:
                            tensor = self.lifted_tensor(spec).detach().cpu()
                            c = relax.const(tensor.numpy(), _torch_dtype(tensor.dtype))
                            self.env[node] = c
                            self.const_names.append((node.name, c))
                    elif node.op == "get_attr":
                        value = getattr(ep.graph_module, node.target)
                        c = relax.const(np.asarray(value.detach().cpu().numpy()), _torch_dtype(value.dtype))
                        self.env[node] = c
                        self.const_names.append((node.name, c))
                    elif node.op == "call_function":
                        try:
                            self.env[node] = self.convert(node)
                        except _NoConverter:
                            raise self._error(captured, node, "the course importer has no converter for this op") from None
                        except _Unsupported as exc:
                            raise self._error(captured, node, f"not supported by the course importer: {exc}") from exc
                        except Exception as exc:
                            reason = tvm_error_text(exc, head=0, tail=6, with_type=True)
                            raise self._error(captured, node, reason) from exc
                    elif node.op == "output":
                        results = [self.env[r] for r in _flatten(node.args[0])]
                        ret = results[0] if len(results) == 1 else relax.Tuple(results)
                        out = bb.emit_output(ret)
                    else:
                        raise self._error(captured, node, f"unsupported FX node kind {node.op}")
            bb.emit_func_output(out, inputs)
        return bb.get(), nodes

    def _error(self, captured, node, reason):
        return IRImportError(node_message(captured, node, reason), hint=_HINT, node=node.name,
                             op=op_name(node))


class _NoConverter(Exception):
    pass


def _pair(v):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return [int(x) for x in (v * 2 if len(v) == 1 else v)]


def _flatten(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flatten(y)
    elif x is not None:
        yield x


def import_course(captured) -> Imported:
    t0 = time.perf_counter()
    imp = _CourseImporter(captured.exported)
    try:
        mod, nodes = imp.run(captured)
    except IRImportError:
        raise
    except Exception as exc:
        reason = tvm_error_text(exc, head=0, tail=6, with_type=True)
        raise IRImportError(f"the course importer failed: {reason}", hint=_HINT) from exc
    env = {n: v for n, v in imp.env.items() if not isinstance(v, tuple)}
    for n, v in imp.env.items():  # batch norm tuple: the node is its first element's binding
        if isinstance(v, tuple) and isinstance(v[0], relax.Var):
            env[n] = v[0]
    prov = compute_provenance(mod, env, nodes, imp.const_names)
    return Imported(mod=mod, provenance=prov, importer="course", seconds=time.perf_counter() - t0)
