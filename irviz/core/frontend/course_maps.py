"""The course's map functions for ``from_fx`` (irviz.core.frontend.course_fx), as the chapter
"Integration with ML frameworks" writes them: each node becomes ``bb.emit_te`` of a tensor
expression (TE) or a TOPI function, so every op is a ``call_tir`` to its own PrimFunc from the start.

    nn.Linear   -> topi.nn.dense(x, w) then topi.add(y, b)       (two call_tir, as in the course)
    nn.ReLU, torch.relu, F.relu  -> te_relu (te.max(x, 0))
    torch.matmul (2-D)           -> te_matmul (te.sum over a reduce_axis)
    torch.add / operator.add, torch.mul / operator.mul, sub, truediv -> topi broadcast ops
    nn.Sigmoid / nn.Tanh, torch.sigmoid / torch.tanh, nn.Flatten / torch.flatten,
    nn.Dropout / nn.Identity (pass-through in eval mode)

A map file's entries replace these for the same key; see course_fx for the signatures.
"""
from __future__ import annotations

import operator

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tvm import relax, te, topi


def te_matmul(A: te.Tensor, B: te.Tensor) -> te.Tensor:
    assert A.shape[1] == B.shape[0]
    n, m = A.shape[0], B.shape[1]
    k = te.reduce_axis((0, A.shape[1]), name="k")
    return te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")


def te_relu(A: te.Tensor) -> te.Tensor:
    return te.compute(A.shape, lambda *i: te.max(A(*i), te.const(0, A.dtype)), name="relu")


def map_param(param) -> relax.Constant:
    t = param.detach().cpu()
    return relax.const(np.ascontiguousarray(t.numpy()), str(t.dtype).replace("torch.", ""))


def _value(node_map, a):
    """A node argument as the map functions take it: a Relax value, or the Python scalar."""
    return node_map[a] if isinstance(a, torch.fx.Node) else a


# ---- call_module_map: fn(bb, node_map, node, nn_mod) ------------------------------------------


def map_nn_linear(bb, node_map, node, nn_mod):
    x = node_map[node.args[0]]
    w = map_param(nn_mod.weight)
    y = bb.emit_te(topi.nn.dense, x, w)
    if nn_mod.bias is not None:
        y = bb.emit_te(topi.add, y, map_param(nn_mod.bias))
    return y


def map_nn_relu(bb, node_map, node, nn_mod):
    return bb.emit_te(te_relu, node_map[node.args[0]])


def map_nn_sigmoid(bb, node_map, node, nn_mod):
    return bb.emit_te(topi.sigmoid, node_map[node.args[0]])


def map_nn_tanh(bb, node_map, node, nn_mod):
    return bb.emit_te(topi.tanh, node_map[node.args[0]])


def map_nn_flatten(bb, node_map, node, nn_mod):
    return _flatten_to(bb, node_map[node.args[0]], nn_mod.start_dim, nn_mod.end_dim)


def map_identity(bb, node_map, node, nn_mod):
    # eval mode: Dropout does nothing, so the node is its input
    return node_map[node.args[0]]


# ---- call_function_map: fn(bb, node_map, node) ------------------------------------------------


def map_matmul(bb, node_map, node):
    a, b = node_map[node.args[0]], node_map[node.args[1]]
    ranks = (len(a.ty.shape.values), len(b.ty.shape.values))
    if ranks != (2, 2):
        raise ValueError(f"the course's te_matmul takes 2-D tensors, got ranks {ranks}; "
                         "give call_function_map[torch.matmul] of your own for this model")
    return bb.emit_te(te_matmul, a, b)


def map_relu(bb, node_map, node):
    return bb.emit_te(te_relu, node_map[node.args[0]])


def _binary(topi_fn):
    def map_binary(bb, node_map, node):
        x, y = _value(node_map, node.args[0]), _value(node_map, node.args[1])
        if "alpha" in node.kwargs and node.kwargs["alpha"] != 1:
            raise ValueError("torch.add/sub with alpha is not in the course map")
        if not isinstance(x, relax.Expr):  # scalar op tensor
            return bb.emit_te(lambda q: topi_fn(x, q), y, primfunc_name_hint=topi_fn.__name__)
        return bb.emit_te(topi_fn, x, y)

    map_binary.__name__ = f"map_{topi_fn.__name__}"
    return map_binary


def _unary(topi_fn):
    def map_unary(bb, node_map, node):
        return bb.emit_te(topi_fn, node_map[node.args[0]])

    map_unary.__name__ = f"map_{topi_fn.__name__}"
    return map_unary


def _flatten_to(bb, x, start_dim=0, end_dim=-1):
    shape = [int(d) for d in x.ty.shape.values]
    nd = len(shape)
    s, e = start_dim % nd, end_dim % nd
    new = shape[:s] + [int(np.prod(shape[s:e + 1]))] + shape[e + 1:]
    return bb.emit_te(topi.reshape, x, new)


def map_flatten(bb, node_map, node):
    x = node_map[node.args[0]]
    start = node.args[1] if len(node.args) > 1 else node.kwargs.get("start_dim", 0)
    end = node.args[2] if len(node.args) > 2 else node.kwargs.get("end_dim", -1)
    return _flatten_to(bb, x, start, end)


CALL_MODULE_MAP = {
    nn.Linear: map_nn_linear,
    nn.ReLU: map_nn_relu,
    nn.Sigmoid: map_nn_sigmoid,
    nn.Tanh: map_nn_tanh,
    nn.Flatten: map_nn_flatten,
    nn.Dropout: map_identity,
    nn.Identity: map_identity,
}

CALL_FUNCTION_MAP = {
    torch.matmul: map_matmul,
    operator.matmul: map_matmul,
    torch.relu: map_relu,
    F.relu: map_relu,
    torch.add: _binary(topi.add),
    operator.add: _binary(topi.add),
    torch.sub: _binary(topi.subtract),
    operator.sub: _binary(topi.subtract),
    torch.mul: _binary(topi.multiply),
    operator.mul: _binary(topi.multiply),
    operator.truediv: _binary(topi.divide),
    torch.sigmoid: _unary(topi.sigmoid),
    torch.tanh: _unary(topi.tanh),
    torch.flatten: map_flatten,
}
