"""What an importer returns, and what both importers share: node naming for errors, provenance.

Provenance: ``fx node name -> [relax binding var names in "main"]``.  The importer emits helper
bindings just before the binding it stores in ``env``; those helpers are grouped with the node.
User inputs map to the Relax parameter of the same name.  Parameters/buffers are bound as constants
(``keep_params_as_input=False``), so a parameter node maps to the bindings that use its constant.
The ``output`` node maps to the bindings left after the last anchored one (``gv = ...``), if any.
"""
from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax

from irviz.core.tvm_compat import GenericConst, var_name


@dataclass
class Imported:
    mod: tvm.IRModule
    provenance: dict[str, list[str]]  # fx node name -> relax binding var names in "main" (in order)
    importer: str  # "exported_program" | "course"
    seconds: float
    # weights kept as main's parameters (--keep-params): name -> numpy array, in main's order,
    # and the .npz the workspace wrote them to (BindParams' default)
    params: dict | None = None
    params_file: str | None = None
    # an IR file's schedule(sch), one step per primitive (frontend.schedule_steps.ScheduleRun):
    # every Session on this import records its steps after step 0
    schedule: object | None = None
    # the weights have no data (meta tensors): main takes every weight, buffer and constant as a
    # parameter after the user inputs, and nothing can run
    structure_only: bool = False


# --------------------------------------------------------------------------------------------
# naming a node in an error


def op_name(node) -> str:
    """'aten.conv2d.default' style name for messages (FxNode.target convention)."""
    t = node.target
    if isinstance(t, str):
        return t
    s = str(t)
    return s if not s.startswith("<") else getattr(t, "__name__", s)


def node_message(captured, node, reason: str) -> str:
    """'FX node "erfinv" (aten.erfinv.default) in module "block.act" (Erf), inputs [(2, 5)]: ...'"""
    module_path, module_type, shapes, source = "", "", None, ""
    fxnode = None
    graph = getattr(captured, "graph", None)
    if graph is not None:
        try:
            fxnode = graph.node(node.name)
        except Exception:
            fxnode = None
    if fxnode is not None:
        module_path, module_type = fxnode.module_path, fxnode.module_type
        source = getattr(fxnode, "source", "") or ""
        shapes = []
        for a in fxnode.args:
            try:
                s = graph.node(a).shapes
                shapes.append(s[0] if len(s) == 1 else s)
            except Exception:
                shapes.append("?")
    else:
        stack = list(node.meta.get("nn_module_stack", {}).values())
        if stack:
            module_path = stack[-1][0]
            module_type = str(stack[-1][1]).rsplit(".", 1)[-1]
        shapes = [_meta_shape(a) for a in node.all_input_nodes]
    where = f'module "{module_path}"' if module_path else "the top-level module"
    if module_type:
        where += f" ({module_type})"
    msg = f'cannot import FX node "{node.name}" ({op_name(node)}) in {where}, input shapes {shapes}'
    if source:
        msg += f", at {source}"
    return f"{msg}: {reason}"


def _meta_shape(n):
    val = n.meta.get("val", n.meta.get("tensor_meta"))
    shape = getattr(val, "shape", None)
    if shape is None:
        return "?"
    return tuple(int(d) if str(d).lstrip("-").isdigit() else str(d) for d in shape)


# --------------------------------------------------------------------------------------------
# provenance


def main_bindings(mod, func: str = "main") -> list:
    f = mod[func]
    body = f.body
    if not isinstance(body, relax.SeqExpr):
        return []
    return [b for blk in body.blocks for b in blk.bindings]


def constants_in(expr) -> list:
    """GenericConst objects referenced by a binding value (call args, tuple fields, ...)."""
    found = []

    def visit(e):
        if isinstance(e, GenericConst):
            found.append(e)

    try:
        relax.analysis.post_order_visit(expr, visit)
    except Exception:
        pass
    return found


def compute_provenance(mod, env: dict, nodes: list, const_names: list[tuple[str, object]]):
    """fx node name -> [binding var names of "main"], see the module docstring.

    env: fx.Node -> relax.Expr (or python value); const_names: [(fx placeholder name, value)] where
    value is the runtime tensor (or GenericConst) bound for that placeholder.
    """
    main = mod["main"]
    bindings = main_bindings(mod)
    bound_vars = {b.var for b in bindings}
    param_names = {var_name(p) for p in main.params}

    var2nodes: dict = {}
    for n, v in env.items():
        if isinstance(v, relax.Var) and v in bound_vars:
            var2nodes.setdefault(v, []).append(n.name)

    prov: dict[str, list[str]] = {}
    pending = []
    for b in bindings:
        pending.append(var_name(b.var))
        if b.var in var2nodes:
            for name in var2nodes[b.var]:
                prov.setdefault(name, []).extend(pending)
            pending = []

    # constants -> consumer bindings
    consumers: dict[str, list[str]] = {}
    if const_names:
        for b in bindings:
            for c in constants_in(b.value):
                for name, value in const_names:
                    if c.same_as(value) or c.value.same_as(value):
                        lst = consumers.setdefault(name, [])
                        vn = var_name(b.var)
                        if vn not in lst:
                            lst.append(vn)

    placeholder_of_var = {v: n.name for n, v in env.items()
                          if n.op == "placeholder" and isinstance(v, relax.Var)}
    output_names = []
    for n in nodes:
        if n.op == "output":
            output_names.append(n.name)
            continue
        if n.name in prov:
            continue
        v = env.get(n)
        if n.op == "placeholder":
            if n.name in param_names:
                prov[n.name] = [n.name]
            else:
                prov[n.name] = consumers.get(n.name, [])
            continue
        if isinstance(v, relax.Var):
            vn = var_name(v)
            if vn in param_names:
                prov[n.name] = [vn]
            else:  # e.g. alias/detach of a parameter bound as a constant: its consumers
                src = placeholder_of_var.get(v)
                prov[n.name] = list(consumers.get(src, [])) if src else []
        elif isinstance(v, relax.Expr):
            # e.g. an unbound Tuple / TupleGetItem: the bindings it refers to
            names = []
            try:
                for fv in relax.analysis.free_vars(v):
                    if fv in bound_vars or var_name(fv) in param_names:
                        names.append(var_name(fv))
            except Exception:
                pass
            prov[n.name] = names
        else:
            prov[n.name] = []
    for name in output_names:
        prov[name] = pending
    order = {n.name: i for i, n in enumerate(nodes)}
    return dict(sorted(prov.items(), key=lambda kv: order.get(kv[0], len(order))))
