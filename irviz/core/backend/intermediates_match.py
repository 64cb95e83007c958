"""Which Relax value of ``main`` holds each FX node's value at a step, for the intermediates
comparison: read from provenance, whose entries are binding ids (``views.provenance.binding_ids``,
unique within main), never from var names. Passes reuse names (FuseOps binds its fused call to a
new ``lv`` beside a surviving ``lv``), so a name can stand for two values of different shapes.

    m = match_values(step, graph, skip={"input", ...})
    m.chosen["relu"]     # "lv#1": the binding whose value is relu's
    m.kernel["relu"]     # "fused_matmul_add_relu": the function that computes that binding
    m.inside["addmm"]    # "relu": addmm is computed inside relu's kernel and never leaves it;
                         # the kernel's output (relu's value) is its nearest materialised value

When several FX nodes land on one binding, the binding holds one of their values: the last of
them (FX order) whose shape is the binding's. The others have no value of their own at this step.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from irviz.core.tvm_compat import callee_name, relax
from irviz.core.views.provenance import binding_ids

__all__ = ["ValueMatch", "main_bindings", "match_values", "ty_shapes"]


@dataclass
class ValueMatch:
    chosen: dict[str, str] = field(default_factory=dict)   # fx node -> binding id with its value
    why: dict[str, str] = field(default_factory=dict)      # fx node -> why it has no value
    kernel: dict[str, str] = field(default_factory=dict)   # fx node -> function computing it
    inside: dict[str, str] = field(default_factory=dict)   # fx node -> fx node at its kernel's output
    binding_of: dict[str, str] = field(default_factory=dict)  # fx node (inside) -> that binding id
    vars: dict[str, object] = field(default_factory=dict)  # binding id -> Var (params included)
    ids: dict[int, str] = field(default_factory=dict)      # Var handle -> binding id

    def sharing(self, fx_node: str) -> list[str]:
        """The FX nodes computed inside the kernel whose output is `fx_node`'s value."""
        return [n for n, out in self.inside.items() if out == fx_node]


def main_bindings(mod) -> list:
    body = mod["main"].body
    if not isinstance(body, relax.SeqExpr):
        return []
    return [b for blk in body.blocks for b in blk.bindings]


def ty_shapes(ty) -> list[tuple] | None:
    """Shapes (dims as str) of the tensors a Relax type holds, flattened; None: not tensors."""
    if isinstance(ty, relax.TensorType):
        return [tuple(str(d) for d in ty.shape.values)] if ty.shape is not None else None
    if isinstance(ty, relax.TupleType):
        out = []
        for f in ty.fields:
            sub = ty_shapes(f)
            if sub is None:
                return None
            out += sub
        return out
    return None


def _kernels(bindings, ids: dict[int, str]) -> dict[str, str]:
    """Binding id -> the function that computes its value: the callee of a call (a fused Relax
    function, a PrimFunc through call_tir, an extern through call_dps_packed or a library call);
    after CallTIRRewrite, the kernel its buffer is first passed to; for an alias, ``t[i]``, a
    reshape of such a value or a tuple of one kernel's outputs, that kernel."""
    out: dict[str, str] = {}
    by_handle: dict[int, str] = {}
    fresh: set[int] = set()  # alloc_tensor results not yet given to a kernel
    for b in bindings:
        value, h = b.value, b.var.__chandle__()
        src = None
        if isinstance(value, relax.Var):
            src = value
        elif isinstance(value, relax.TupleGetItem) and isinstance(value.tuple_value, relax.Var):
            src = value.tuple_value
        elif isinstance(value, relax.Call) and not isinstance(value.op, (relax.GlobalVar, relax.ExternFunc)):
            opname = str(getattr(value.op, "name", ""))
            if opname.endswith("alloc_tensor"):
                fresh.add(h)
                continue
            if opname.endswith("reshape") and value.args and isinstance(value.args[0], relax.Var):
                src = value.args[0]
        elif isinstance(value, relax.Tuple):  # the outputs of one kernel, gathered (CallTIRRewrite)
            of = {by_handle.get(f.__chandle__()) if isinstance(f, relax.Var) else None
                  for f in value.fields}
            if len(of) == 1 and None not in of:
                by_handle[h] = out[ids[h]] = of.pop()
            continue
        if src is not None:
            if src.__chandle__() in by_handle:
                by_handle[h] = by_handle[src.__chandle__()]
                out[ids[h]] = by_handle[h]
            continue
        if not isinstance(value, relax.Call):
            continue
        callee = callee_name(value.op)
        if callee is None and value.args:  # call_tir / call_dps_packed: the callee is args[0]
            callee = callee_name(value.args[0])
        if callee is None or callee.startswith("vm.builtin."):
            continue
        by_handle[h] = callee
        out[ids[h]] = callee
        for a in value.args:
            if isinstance(a, relax.Var) and a.__chandle__() in fresh:
                fresh.discard(a.__chandle__())
                by_handle[a.__chandle__()] = callee
                out[ids[a.__chandle__()]] = callee
    return out


def match_values(step, graph, skip) -> ValueMatch:
    """Each FX node (kinds in `skip` left out) -> the binding id that holds its value at `step`."""
    main = step.mod["main"]
    bindings = main_bindings(step.mod)
    ids = binding_ids(main)
    m = ValueMatch(ids=ids)
    order: dict[str, int] = {}
    for i, v in enumerate(list(main.params) + [b.var for b in bindings]):
        bid = ids[v.__chandle__()]
        m.vars[bid] = v
        order[bid] = i
    shapes = {bid: ty_shapes(v.ty) for bid, v in m.vars.items()}
    kernels = _kernels(bindings, ids)
    wants: dict[str, list[tuple]] = {}
    for node in graph.nodes:
        if node.kind in skip:
            continue
        if node.name not in step.provenance:
            m.why[node.name] = "no mapping: the importer gave this node no Relax binding"
            continue
        cands = [bid for bid in dict.fromkeys(step.provenance[node.name]) if bid in m.vars]
        if not cands:
            m.why[node.name] = "no mapping: its bindings are gone at this step"
            continue
        want = wants[node.name] = [tuple(str(d) for d in sh) for sh in node.shapes]
        # the latest binding, preferring one of the node's own shapes, then its tensor count
        m.chosen[node.name] = max(cands, key=lambda b: (shapes[b] == want,
                                                        len(shapes[b] or ()) == len(want), order[b]))
    groups: dict[str, list[str]] = {}
    for node in graph.nodes:  # FX order
        if node.name in m.chosen:
            groups.setdefault(m.chosen[node.name], []).append(node.name)
    for bid, names in groups.items():
        fits = [n for n in names if shapes[bid] == wants[n]]
        out = (fits or names)[-1]
        for n in names:
            if bid in kernels:
                m.kernel[n] = kernels[bid]
            if n != out:
                m.inside[n] = out
                m.binding_of[n] = bid
                del m.chosen[n]
    return m
