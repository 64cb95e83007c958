"""Graph view-models of the IRs (networkx), for the GUI's graph panes and the CLI.

* ``fx_digraph(FxGraph)``: the FX graph (delegates to ``FxGraph.to_networkx``).
* ``relax_digraph(mod, func)``: one node per binding of a Relax function, plus its parameters,
  the constants it uses and an ``output`` node; edges are variable uses. ``call_dps_packed``
  nodes say whether their function is registered (``mark_externs``).
* ``module_relax_digraph(mod)``: every Relax function in one graph, a group per function.
* ``tir_functions(mod)``: a summary of each PrimFunc (signature, loop nest, blocks).
* ``relax_functions(mod)``, ``call_graph(mod)``.
"""
from __future__ import annotations

import networkx as nx
import tvm
from tvm import relax, tirx

from irviz.core.tvm_compat import GenericConst, callee_name, var_name
from irviz.core.views.decisions import decision_texts
from irviz.core.views.provenance import binding_ids, unique_id

KINDS = ("param", "const", "op", "call_tir", "call_dps_packed", "call_fused", "tuple", "get_item",
         "output")

_CALL_TIR_OPS = ("relax.call_tir", "relax.call_tir_inplace", "relax.call_tir_with_grad")


def fx_digraph(graph) -> nx.DiGraph:
    """nodes keyed by FX node name, attrs = the FxNode fields; edges carry "shape"."""
    return graph.to_networkx()


# ---- types -> shape / dtype ---------------------------------------------------------------


def _dim(d):
    if isinstance(d, int):
        return d
    if isinstance(d, tirx.IntImm):
        return int(d.value)
    return str(d)


def type_shape_dtype(ty):
    """(shape, dtype) of a Relax type: tensors -> (tuple of int|str dims | None, "float32");
    tuples -> (list of field shapes, "tuple"); shapes -> (None, "shape"); others (None, None)."""
    if ty is None:
        return None, None
    if isinstance(ty, relax.TensorType):
        shape = None
        sh = getattr(ty, "shape", None)
        if sh is not None:
            values = getattr(sh, "values", None)
            if values is not None:
                shape = tuple(_dim(d) for d in values)
        dtype = str(ty.dtype) if ty.dtype is not None else None
        return shape, (dtype or None)
    if isinstance(ty, relax.TupleType):
        return [type_shape_dtype(f)[0] for f in ty.fields], "tuple"
    if isinstance(ty, relax.ShapeType):
        return None, "shape"
    dtype = getattr(ty, "dtype", None)
    return None, (str(dtype) if dtype is not None else None)


def _expr_ty(e):
    try:
        return e.ty
    except Exception:
        return None


# ---- relax graph ----------------------------------------------------------------------------


def _short_op(name: str) -> str:
    return name[len("relax."):] if name.startswith("relax.") else name


def _callee_name(e):
    # a closure bound to a local var is shown by that var's name
    return var_name(e) if isinstance(e, relax.Var) else callee_name(e)


def _is_primitive(func) -> bool:
    attrs = getattr(func, "attrs", None)
    if attrs is None:
        return False
    try:
        return "Primitive" in attrs and bool(int(attrs["Primitive"]))
    except Exception:
        return False


def _describe(value, mod):
    """(label, op, kind, callee, group, operand exprs) of a binding value."""
    if isinstance(value, relax.Call):
        op = value.op
        if isinstance(op, tvm.ir.Op):
            name = op.name
            args = list(value.args)
            if name in _CALL_TIR_OPS:
                callee = _callee_name(args[0])
                operands = list(args[1].fields) if isinstance(args[1], relax.Tuple) else [args[1]]
                operands += args[2:]
                return (f"{_short_op(name)} {callee}", name, "call_tir", callee, None, operands)
            if name == "relax.call_dps_packed":
                callee = _callee_name(args[0])
                operands = list(args[1].fields) if isinstance(args[1], relax.Tuple) else [args[1]]
                return (f"call_dps_packed {callee}", name, "call_dps_packed", callee, None, operands)
            if name in ("relax.call_pure_packed", "relax.call_packed", "relax.call_inplace_packed"):
                callee = _callee_name(args[0]) if args else None
                return (f"{_short_op(name)} {callee}", name, "op", callee, None, args[1:])
            short = _short_op(name)
            label = short.rsplit(".", 1)[-1] if short.startswith("nn.") else short
            return (label, name, "op", None, None, args)
        callee = _callee_name(op)
        if isinstance(op, tvm.ir.GlobalVar):
            try:
                target = mod[op]
            except Exception:
                target = None
            if isinstance(target, relax.Function) and _is_primitive(target):
                return (f"call {callee}", "call", "call_fused", callee, callee, list(value.args))
            if isinstance(target, tirx.PrimFunc):  # after CallTIRRewrite: direct DPS call
                return (f"call {callee}", "call", "call_tir", callee, None, list(value.args))
            return (f"call {callee}", "call", "op", callee, None, list(value.args))
        return (f"call {callee}", "call", "op", callee, None, [op, *value.args])
    if isinstance(value, relax.Tuple):
        return ("tuple", "tuple", "tuple", None, None, list(value.fields))
    if isinstance(value, relax.TupleGetItem):
        return (f"[{value.index}]", "get_item", "get_item", None, None, [value.tuple_value])
    if isinstance(value, relax.Var):
        return ("= " + var_name(value), "alias", "op", None, None, [value])
    if isinstance(value, GenericConst):
        return ("const", "const", "const", None, None, [])
    if isinstance(value, relax.If):
        return ("if", "if", "op", None, None, [value.cond, *_free_vars(value.true_branch),
                                                *_free_vars(value.false_branch)])
    if isinstance(value, relax.ShapeExpr):
        return ("shape", "shape", "op", None, None, [])
    if isinstance(value, relax.Function):
        return ("function", "function", "op", None, None, _free_vars(value))
    return (type(value).__name__, type(value).__name__, "op", None, None, _free_vars(value))


def _free_vars(e):
    try:
        return list(relax.analysis.free_vars(e))
    except Exception:
        return []


def relax_digraph(mod, func: str = "main", expand_fused: bool = False) -> nx.DiGraph:
    """One node per binding var (+ params, used constants, "output"); edges are variable uses.

    Node attrs: label, op, kind (see KINDS), callee, shape, dtype, group, var (the Relax var name or
    None), index (order in the function).  Edge attrs: shape (of the value flowing), dtype.
    With expand_fused=True, calls to Primitive (fused) Relax functions are replaced by the
    bindings of the fused function, each with group=<fused function name>, ids "<call var>/<var>".
    """
    f = mod[func]
    g = nx.DiGraph(name=func)
    ids: dict = {}  # relax.Var -> node id
    const_ids: dict = {}  # GenericConst -> node id
    # main's own vars take the ids provenance names them by, whatever else gets a node first
    own_ids = binding_ids(f)
    used_names: set = set(own_ids.values())
    order = [0]

    def new_id(name):
        return unique_id(name, used_names)

    def add_node(nid, **attrs):
        attrs.setdefault("group", None)
        attrs.setdefault("callee", None)
        attrs["index"] = order[0]
        order[0] += 1
        g.add_node(nid, **attrs)

    def add_var_node(var, kind, label, op, callee=None, group=None, prefix=""):
        shape, dtype = type_shape_dtype(_expr_ty(var))
        own = None if prefix else own_ids.get(var.__chandle__())
        nid = own if own is not None else new_id(prefix + var_name(var))
        ids[var] = nid
        add_node(nid, label=label, op=op, kind=kind, callee=callee, shape=shape, dtype=dtype,
                 group=group, var=var_name(var))
        return nid

    def const_node(c, group=None):
        for k, nid in const_ids.items():
            if k.same_as(c):
                return nid
        shape, dtype = type_shape_dtype(_expr_ty(c))
        nid = new_id(f"const{len(const_ids)}")
        const_ids[c] = nid
        label = "const" + (f" {shape}" if shape is not None and shape != () else "")
        add_node(nid, label=label, op="const", kind="const", shape=shape, dtype=dtype, group=group,
                 var=None)
        return nid

    def connect(src_expr, dst, local=None, group=None):
        """edges from the vars/constants in src_expr to node dst"""
        local = local or {}
        if isinstance(src_expr, relax.Var):
            src = local.get(src_expr, ids.get(src_expr))
            if src is None:
                return
            shape, dtype = type_shape_dtype(_expr_ty(src_expr))
            g.add_edge(src, dst, shape=shape, dtype=dtype)
        elif isinstance(src_expr, GenericConst):
            src = const_node(src_expr, group)
            shape, dtype = type_shape_dtype(_expr_ty(src_expr))
            g.add_edge(src, dst, shape=shape, dtype=dtype)
        elif isinstance(src_expr, relax.Tuple):
            for x in src_expr.fields:
                connect(x, dst, local, group)
        elif isinstance(src_expr, (relax.ShapeExpr, tvm.ir.GlobalVar, relax.ExternFunc)):
            return
        elif isinstance(src_expr, relax.Expr):
            for v in _free_vars(src_expr):
                connect(v, dst, local, group)

    for p in f.params:
        add_var_node(p, "param", var_name(p), "param")

    def add_bindings(bindings, local=None, group=None, prefix=""):
        for b in bindings:
            value = b.value
            if isinstance(b, relax.MatchCast):
                label, op, kind, callee, grp, operands = ("match_cast", "match_cast", "op", None,
                                                          None, [value])
            else:
                label, op, kind, callee, grp, operands = _describe(value, mod)
            if expand_fused and kind == "call_fused" and local is None:
                fused = mod[callee]
                # the fused function's params stand for the call's arguments
                inner = dict(zip(fused.params, value.args))
                _expand(b, fused, inner, callee, var_name(b.var) + "/")
                continue
            if isinstance(value, GenericConst):
                nid = add_var_node(b.var, "const", "const", "const", group=group or grp,
                                   prefix=prefix)
                continue
            nid = add_var_node(b.var, kind, label, op, callee, group or grp, prefix=prefix)
            for o in operands:
                connect(o, nid, local, group)
            if local is not None:
                local[b.var] = nid

    def _expand(binding, fused, arg_of_param, callee, prefix):
        """inline the bindings of a fused function; its params alias the call's arguments"""
        local = {}
        for prm, a in arg_of_param.items():
            if isinstance(a, relax.Var) and a in ids:
                local[prm] = ids[a]
            elif isinstance(a, GenericConst):
                local[prm] = const_node(a)
        body = fused.body
        blocks = body.blocks if isinstance(body, relax.SeqExpr) else []
        for blk in blocks:
            add_bindings(blk.bindings, local=local, group=callee, prefix=prefix)
        # the call's var = the fused function's result
        result = body.body if isinstance(body, relax.SeqExpr) else body
        if isinstance(result, relax.Var) and result in local:
            ids[binding.var] = local[result]
            g.nodes[local[result]]["var"] = var_name(binding.var)
            # the call binding has no node of its own: a query match naming it finds this one
            g.nodes[local[result]]["binding_id"] = own_ids.get(binding.var.__chandle__())
        else:
            nid = add_var_node(binding.var, "call_fused", f"call {callee}", "call", callee, callee)
            connect(result, nid, local, callee)

    body = f.body
    if isinstance(body, relax.SeqExpr):
        for blk in body.blocks:
            add_bindings(blk.bindings)
        result = body.body
    else:
        result = body
    shape, dtype = type_shape_dtype(_expr_ty(result))
    out_id = new_id("output")
    add_node(out_id, label="output", op="output", kind="output", shape=shape, dtype=dtype,
             var=None)
    connect(result, out_id)
    mark_externs(g, mod)
    mark_decisions(g, mod, func)
    return g


def mark_decisions(g: nx.DiGraph, mod, func: str = "main") -> None:
    """conv2d / matmul nodes LibraryDispatch measured get ``decision``: "torch 1.2 ms · TIR 0.9 ms → TIR"."""
    texts = decision_texts(mod, func)
    if not texts:
        return
    for _nid, d in g.nodes(data=True):
        if d.get("var") in texts:
            d["decision"] = texts[d["var"]]


def extern_registered(name: str, mod=None) -> bool:
    """Whether a call_dps_packed target can be found at run time: a function of the module itself
    (the course calls its own prim_funcs this way) or a global function registered in this
    process (tvm.register_global_func)."""
    if mod is not None and any(gv.name_hint == name for gv in mod.get_global_vars()):
        return True
    return tvm.get_global_func(name, allow_missing=True) is not None


def mark_externs(g: nx.DiGraph, mod) -> None:
    """call_dps_packed nodes get ``extern`` (the function's name) and ``registered``; one that is
    not registered is marked failed (drawn red) with "not registered: NAME" under its label, so a
    missing library function shows before the build fails on it."""
    for _nid, d in g.nodes(data=True):
        if d.get("kind") != "call_dps_packed" or not d.get("callee"):
            continue
        name = str(d["callee"])
        d["extern"] = name
        d["registered"] = extern_registered(name, mod)
        if not d["registered"]:
            d["failed"] = True
            d["sublabel"] = f"not registered: {name}"
            d["error"] = (f"{name} is not a function of the module nor registered in the engine: "
                          "register it (tvm.register_global_func) in the opened file, or the run "
                          "fails on it")


ALL_FUNCTIONS = "*"   # the name that asks for every Relax function at once (irviz.protocol.commands too)


def _root_var(nid: str) -> str:
    # an expanded fused binding is "<call var>/<inner var>"; a repeated name "<var>#<k>"
    return nid.split("/", 1)[0].split("#", 1)[0]


def module_relax_digraph(mod, expand_fused: bool = False) -> nx.DiGraph:
    """Every Relax function of the module that is not a fused ("Primitive") sub-function, in one
    graph: a group per function (``group`` = its name; fused groups nest under it, and a function
    with several binding blocks has a group per block). main's node ids are those of
    ``relax_digraph(mod, "main")``; another function's are prefixed "<function>/". Node attr
    ``function`` names the function."""
    g = nx.DiGraph(name=ALL_FUNCTIONS)
    names = [gv.name_hint for gv, f in _functions(mod)
             if isinstance(f, relax.Function) and not _is_primitive(f)]
    for name in names:
        sub = relax_digraph(mod, name, expand_fused=expand_fused)
        body = mod[name].body
        blocks = list(body.blocks) if isinstance(body, relax.SeqExpr) else []
        block_of = {}
        if len(blocks) > 1:
            for i, blk in enumerate(blocks):
                kind = "dataflow" if isinstance(blk, relax.DataflowBlock) else "block"
                for b in blk.bindings:
                    block_of[var_name(b.var)] = f"{kind} {i + 1}"
        prefix = "" if name == "main" else f"{name}/"
        for nid, d in sub.nodes(data=True):
            attrs = dict(d)
            path = [name]
            block = block_of.get(_root_var(str(nid)))
            if block is not None:
                path.append(block)
            if attrs.get("group"):
                path.append(str(attrs["group"]))
            attrs["group"] = ".".join(path)
            attrs["function"] = name
            g.add_node(prefix + str(nid), **attrs)
        for u, v, d in sub.edges(data=True):
            g.add_edge(prefix + str(u), prefix + str(v), **d)
    return g


# ---- TensorIR -------------------------------------------------------------------------------


def _expr_str(e) -> str:
    if isinstance(e, tirx.IntImm):
        return str(int(e.value))
    return str(e)


def _param_sig(p) -> str:
    ty = getattr(p, "ty", None)
    name = var_name(p)
    if isinstance(ty, tirx.BufferType):
        dims = [_expr_str(d) for d in ty.shape]
        shape = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
        return f'{name}: T.Buffer({shape}, "{ty.dtype}")'
    dtype = getattr(ty, "dtype", None) if ty is not None else None
    if dtype is None:
        dtype = getattr(p, "dtype", None)
    return f"{name}: T.{dtype}" if dtype is not None else name


def _for_kind(kind) -> str:
    try:
        return tirx.ForKind(int(kind)).name.lower()
    except Exception:
        return str(kind)


_CHILD_ATTRS = ("init", "body", "block", "seq", "then_case", "else_case")


def _walk_tir(stmt, depth, loops, blocks):
    if stmt is None:
        return
    tname = type(stmt).__name__
    if isinstance(stmt, tirx.For):
        v = var_name(stmt.loop_var)
        ext = _expr_str(stmt.extent)
        start = _expr_str(stmt.min)
        rng = ext if start == "0" else f"[{start}, {start} + {ext})"
        loops.append({"depth": depth, "var": v, "extent": ext, "kind": _for_kind(stmt.kind),
                      "text": "  " * depth + f"{v} in {rng} ({_for_kind(stmt.kind)})"})
        _walk_tir(stmt.body, depth + 1, loops, blocks)
        return
    if tname == "SBlock":
        name = getattr(stmt, "name_hint", None) or getattr(stmt, "name", "")
        if name != "root":
            blocks.append(str(name))
    for attr in _CHILD_ATTRS:
        try:
            ch = getattr(stmt, attr, None)
        except Exception:
            ch = None
        if ch is None:
            continue
        if isinstance(ch, (tirx.Stmt,)) or type(ch).__name__ in ("SBlock", "SBlockRealize"):
            _walk_tir(ch, depth, loops, blocks)
        elif not isinstance(ch, (str, bytes)) and hasattr(ch, "__iter__"):
            for x in ch:
                if isinstance(x, tirx.Stmt):
                    _walk_tir(x, depth, loops, blocks)


def _symbolic_sizes(func) -> list[str]:
    """The size variables in a PrimFunc's buffer shapes (m, n, k of the course's linear0), in order
    of appearance."""
    out: list[str] = []
    for p in func.params:
        ty = getattr(p, "ty", None)
        if not isinstance(ty, tirx.BufferType):
            continue
        for d in ty.shape:
            if isinstance(d, tirx.IntImm):
                continue
            names = [str(d)] if isinstance(d, tirx.Var) else sorted(
                {str(v) for v in _vars_in(d)}) or [str(d)]
            out.extend(n for n in names if n not in out)
    return out


def _vars_in(expr) -> list:
    found = []
    try:
        tirx.stmt_functor.post_order_visit(expr, lambda e: found.append(e) if isinstance(e, tirx.Var) else None)
    except Exception:  # a label only: the expression's text will do
        return []
    return found


def tir_functions(mod) -> list[dict]:
    """Per PrimFunc: {"name", "sizes" (its symbolic sizes), "signature", "params", "loops"
    (strings, indented by depth), "loop_nest" (dicts with depth/var/extent/kind), "blocks"}."""
    out = []
    for gv, func in _functions(mod):
        if not isinstance(func, tirx.PrimFunc):
            continue
        params = [_param_sig(p) for p in func.params]
        loops, blocks = [], []
        _walk_tir(func.body, 0, loops, blocks)
        out.append({
            "name": gv.name_hint,
            "sizes": _symbolic_sizes(func),
            "signature": "(" + ", ".join(params) + ")",
            "params": params,
            "loops": [lp["text"] for lp in loops],
            "loop_nest": loops,
            "blocks": blocks,
        })
    return out


# ---- functions / call graph -----------------------------------------------------------------


def _functions(mod):
    items = list(mod.functions.items())
    items.sort(key=lambda kv: (kv[0].name_hint != "main", 0))  # main first, otherwise module order
    return items


def relax_functions(mod) -> list[str]:
    """names of the Relax functions, "main" first."""
    return [gv.name_hint for gv, f in _functions(mod) if isinstance(f, relax.Function)]


def call_graph(mod) -> nx.DiGraph:
    """function -> functions it references (call_tir / direct calls / call_dps_packed externs).

    Node attrs: kind "relax" | "tir" | "extern", primitive (bool, for fused relax functions).
    """
    g = nx.DiGraph()
    for gv, f in _functions(mod):
        kind = "relax" if isinstance(f, relax.Function) else (
            "tir" if isinstance(f, tirx.PrimFunc) else type(f).__name__)
        g.add_node(gv.name_hint, kind=kind, primitive=_is_primitive(f))
    for gv, f in _functions(mod):
        if not isinstance(f, relax.Function):
            continue

        def visit(e, src=gv.name_hint):
            if isinstance(e, tvm.ir.GlobalVar):
                if e.name_hint != src:
                    g.add_edge(src, e.name_hint)
            elif isinstance(e, relax.ExternFunc):
                name = str(e.global_symbol)
                if name not in g:
                    g.add_node(name, kind="extern", primitive=False)
                g.add_edge(src, name)

        try:
            relax.analysis.post_order_visit(f, visit)
        except Exception:
            for ref in relax.analysis.all_global_vars(f):
                if ref.name_hint != gv.name_hint:
                    g.add_edge(gv.name_hint, ref.name_hint)
    return g
