"""``tensor.item()`` of a tensor no model input reaches: imported as the number it is.

Reformer's axial position embeddings slice their weights to ``position_ids.max().item()``, where
``position_ids`` is an ``arange`` over the fixed sequence length.  torch.export cannot see that the
value is fixed and makes it an unbacked size (``u0``); TVM imports it as ``tensor_to_shape`` plus a
``match_cast`` that defines the symbolic size, and in Reformer, after FoldConstant, FuseOps (TVM
0.27) places a fused call that uses the size before that ``match_cast``, so the build fails in
VMShapeLower ("... has not been computed"; a small module with the same slice builds).  Nothing
about the value depends on the model's inputs, so it is computed here, once, from the nodes that
make it, and the slices get a fixed size (and torch's ``sym_size`` of them is that size as a TIR
integer, as TVM gives a symbolic one).

Only when every node it comes from is a computation on constants: no placeholder (an input, a
weight, a buffer: a weight could be edited after import), nothing random or uninitialised; an
integer or bool scalar.  Anything else goes to TVM's own converter.
"""
from __future__ import annotations

# ops whose result is not a function of their arguments
_NOT_PURE = ("rand", "normal", "uniform", "bernoulli", "dropout", "empty", "multinomial", "poisson",
             "exponential", "geometric", "cauchy", "log_normal")
_MAX_NODES = 200  # a longer chain is not a constant worth folding at import


def constant_item(node):
    """The Python int / bool `node` (an item / _local_scalar_dense) has for every input, or None."""
    import torch
    from torch import fx

    order: list[fx.Node] = []
    seen: set[fx.Node] = set()
    stack = [node.args[0]] if node.args and isinstance(node.args[0], fx.Node) else []
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op != "call_function" or len(seen) > _MAX_NODES:
            return None
        name = str(getattr(n.target, "__name__", n.target))
        if any(word in name for word in _NOT_PURE):
            return None
        stack.extend(n.all_input_nodes)
        order.append(n)
    if not order:
        return None
    position = {n: i for i, n in enumerate(node.graph.nodes)}
    values: dict = {}
    try:
        for n in sorted(order, key=position.__getitem__):
            args = fx.node.map_arg(n.args, values.__getitem__)
            kwargs = fx.node.map_arg(n.kwargs, values.__getitem__)
            values[n] = n.target(*args, **kwargs)
    except Exception:  # not computable here: TVM's converter decides
        return None
    value = values[node.args[0]]
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        return None
    if value.dtype == torch.bool:
        return bool(value.item())
    if value.dtype.is_floating_point or value.dtype.is_complex:
        return None
    return int(value.item())


def convert_item(node, importer, tvm_item):
    """A constant TIR integer where TVM would define a symbolic one (TVM's converters for the
    size arithmetic and comparisons that follow take TIR expressions, not Python ints)."""
    from tvm import tirx

    value = constant_item(node)
    if value is None:
        return tvm_item(node)
    return tirx.IntImm("bool", value) if isinstance(value, bool) else tirx.IntImm("int64", value)


def convert_sym_size(node, importer, tvm_sym_size):
    """torch's size of a dim that torch thought symbolic (one made from an item) and Relax knows:
    a TIR integer, the type TVM gives a symbolic size, rather than the int32 tensor constant TVM
    emits for a known one, which the size comparisons that follow (``u1 >= 0``) cannot take."""
    from tvm import tirx

    shape = importer.shape_of(importer.env[node.args[0]])
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    known = shape[dim] if shape is not None else None
    if isinstance(known, tirx.IntImm):
        return tirx.IntImm("int64", int(known.value))
    return tvm_sym_size(node)
