"""Provenance through passes: which Relax bindings of "main" each FX node became, carried from
step to step by Var identity, and which global function each binding calls."""
from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

from irviz.core.tvm_compat import callee_name, relax, var_name
from irviz.core.views import module_diff as diff_mod

__all__ = ["binding_ids", "carry_provenance", "clear_caches", "relax_to_callee", "unique_id"]


@dataclass
class _FusionGroup:
    """A new binding that calls a fused function, and the old bindings found inside it."""
    call: str                        # var name of the new call binding
    members: set[int]                # handles of the old binding vars it replaced
    output_signature: tuple | None   # (op, callee) of the fused body's last binding
    inputs: set[int]                 # handles of the vars the new call uses
    output_found: bool = False       # the old binding that became its result is matched
    unmatched: Counter = field(default_factory=Counter)  # signatures of the body not matched yet


def _func(mod, name="main"):
    for gv, f in mod.functions.items():
        if gv.name_hint == name:
            return f if isinstance(f, relax.Function) else None
    return None


def clear_caches() -> None:
    _BINDINGS.clear()
    diff_mod.clear_caches()


def _relax_funcs(mod) -> dict:
    return {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, relax.Function)}


_BINDINGS: dict[int, tuple[object, list]] = {}  # function handle -> (function, bindings)


def _bindings(func) -> list:
    """Bindings of a Relax function's body, cached (reading TVM arrays item by item is slow)."""
    key = func.__chandle__()
    hit = _BINDINGS.get(key)
    if hit is not None:
        return hit[1]
    body = getattr(func, "body", None)
    out = [] if not isinstance(body, relax.SeqExpr) else [
        b for blk in list(body.blocks) for b in list(blk.bindings)]
    if len(_BINDINGS) > 512:
        _BINDINGS.clear()
    _BINDINGS[key] = (func, out)  # keeps func alive so the handle is not reused
    return out


def _h(obj) -> int:
    return obj.__chandle__()


def unique_id(name: str, used: set) -> str:
    """``name``, or ``name#1``, ``name#2``... when taken; adds the result to ``used``."""
    nid, k = name, 1
    while nid in used:
        nid = f"{name}#{k}"
        k += 1
    used.add(nid)
    return nid


def binding_ids(func) -> dict[int, str]:
    """Var handle -> id of each parameter and binding of a Relax function, unique within it.

    Passes reuse names for new vars (FuseOps names a fused call ``lv`` next to a surviving ``lv``;
    SplitLayoutRewritePreproc binds the rewritten call to a new ``lv1``), so a name alone can stand
    for two bindings.  The k-th repeat of a name is ``name#k``, in order of appearance, params
    first: the node ids of ``views.graph.relax_digraph``, which is what the GUI highlights."""
    used: set = set()
    out: dict[int, str] = {}
    for v in list(func.params) + [b.var for b in _bindings(func)]:
        out[_h(v)] = unique_id(var_name(v), used)
    return out


def _used_vars(expr) -> list:
    out = []

    def visit(e):
        if isinstance(e, relax.Var):
            out.append(e)

    relax.analysis.post_order_visit(expr, visit)
    return out


def _signature(value):
    """(op name, callee name) of a binding value, to match a binding with its fused copy."""
    if isinstance(value, relax.Call):
        op = value.op
        opname = op.name_hint if isinstance(op, relax.GlobalVar) else getattr(op, "name", type(op).__name__)
        callee = None
        if value.args and isinstance(value.args[0], relax.GlobalVar):
            callee = value.args[0].name_hint
        return (str(opname), callee)
    return (type(value).__name__, None)


def carry_provenance(old_mod, new_mod, provenance: dict[str, list[str]]) -> dict[str, list[str]]:
    """Map provenance (fx node -> binding ids of old "main", see ``binding_ids``) onto new "main".

    Works on Var *identity*, not names (FuseOps re-uses names such as ``lv1`` for new vars):

    1. A binding var (or parameter) of old main that is still the same object in new main keeps
       its name there.
    2. Fusion: for a new binding that calls a Relax function of the new module (FuseOps,
       MatmulAddFuse, ...), the fused function's body still holds the *original* binding vars
       (same objects) of the group it replaced; they map to that new call binding.  The group's
       output binding becomes a fresh var inside the fused function; it is found as the old var
       that is not matched yet and consumes a member of the group (or, for a one-op group,
       consumes one of the call's inputs and has the same op as the fused body).  A call of a
       function whose body holds another group's vars (FuseOps shares one function between
       identical groups) takes the old bindings that, from its inputs on, do the body's ops.
    3. Anything else that disappeared (folded by FoldConstant, aliases removed by FuseTIR, ...)
       maps to the nearest surviving binding downstream of it in the old graph (the binding that
       now contains its computation), else the nearest one upstream, else nothing.

    A var that survives as an alias of a new binding no old var became (``lv = lv1``, the
    rewritten kernel's call bound to a new var by SplitLayoutRewritePreproc) also maps to that
    binding: the computation moved there.

    Keys are kept (a node whose bindings are all gone maps to []).
    """
    old_main, new_main = _func(old_mod), _func(new_mod)
    if new_main is None:
        return {k: [] for k in provenance}
    new_b = _bindings(new_main)
    new_names = binding_ids(new_main)
    if old_main is None:
        present = set(new_names.values())
        return {k: [n for n in v if n in present] for k, v in provenance.items()}
    if old_main.same_as(new_main):
        return {k: list(v) for k, v in provenance.items()}

    old_b = _bindings(old_main)
    old_vars = [b.var for b in old_b]
    old_ids = binding_ids(old_main)
    old_by_id = {old_ids[_h(v)]: v for v in list(old_main.params) + old_vars}
    old_index = {_h(v): i for i, v in enumerate(old_vars)}
    deps: dict[int, list[int]] = {}
    users: dict[int, list[int]] = {}
    for b in old_b:
        hv = _h(b.var)
        ds = [_h(u) for u in _used_vars(b.value)]
        deps[hv] = ds
        for d in ds:
            users.setdefault(d, []).append(hv)

    mapping: dict[int, list[str]] = {}
    # 1. identity
    for v in list(old_main.params) + old_vars:
        hv = _h(v)
        if hv in new_names:
            mapping[hv] = [new_names[hv]]

    # 2. fusion groups
    groups: list[_FusionGroup] = []
    new_funcs = _relax_funcs(new_mod)
    for b in new_b:
        value = b.value
        if not (isinstance(value, relax.Call) and isinstance(value.op, relax.GlobalVar)):
            continue
        callee = new_funcs.get(value.op.name_hint)
        if callee is None:
            continue
        inner = _bindings(callee)
        name = new_names[_h(b.var)]
        members = set()
        for ib in inner:
            hv = _h(ib.var)
            if hv in old_index and hv not in mapping:
                mapping[hv] = [name]
                members.add(hv)
        out_sig = _signature(inner[-1].value) if inner else None
        inputs = {_h(u) for u in _used_vars(value)}
        groups.append(_FusionGroup(name, members, out_sig, inputs,
                                   unmatched=Counter(_signature(ib.value) for ib in inner)))
    if groups:
        new_to_old: dict[str, set[int]] = {}
        for hv, names in mapping.items():
            for n in names:
                new_to_old.setdefault(n, set()).add(hv)
        old_value = {_h(b.var): b.value for b in old_b}
        # FuseOps gives identical groups one function, whose body holds the vars of one group only:
        # the others are the old bindings that consume the call's inputs (or bindings already
        # matched) and do what the body does, matched op by op in program order
        for g in groups:
            g.unmatched -= Counter(_signature(old_value[hv]) for hv in g.members)
            reach = set(g.members)
            for hin in g.inputs:
                reach |= new_to_old.get(new_names.get(hin, ""), set())
            for v in old_vars:
                hv = _h(v)
                if hv in mapping or not set(deps.get(hv, ())) & reach:
                    continue
                sig = _signature(old_value[hv])
                if g.unmatched[sig] > 0:
                    g.unmatched[sig] -= 1
                    mapping[hv] = [g.call]
                    g.members.add(hv)
                    reach.add(hv)
                    g.output_found = True
                    new_to_old.setdefault(g.call, set()).add(hv)
        progress = True
        while progress:
            progress = False
            for v in old_vars:
                hv = _h(v)
                if hv in mapping:
                    continue
                ds = set(deps.get(hv, ()))
                pick = None
                for g in groups:
                    if ds & g.members:
                        pick = g
                        break
                if pick is None:
                    for g in groups:
                        if g.output_found or g.members:
                            continue
                        ins = set()
                        for hin in g.inputs:
                            ins |= new_to_old.get(new_names.get(hin, ""), set())
                        if ds & ins and _signature(old_value[hv]) == g.output_signature:
                            pick = g
                            break
                if pick is not None:
                    mapping[hv] = [pick.call]
                    pick.members.add(hv)
                    pick.output_found = True
                    new_to_old.setdefault(pick.call, set()).add(hv)
                    progress = True

    # 2b. same name, same kind of value: passes that rebuild every var (ToNonDataflow turns each
    # DataflowVar into a new Var) keep the names. A new alias (`lv = alloc`, CallTIRRewrite) also
    # counts: the value now lives in the buffer it aliases.
    taken = {n for names in mapping.values() for n in names}
    new_by_name = {new_names[_h(b.var)]: b for b in new_b}
    for b in old_b:
        hv = _h(b.var)
        if hv in mapping:
            continue
        nb = new_by_name.get(old_ids[hv])
        if nb is None or old_ids[hv] in taken:
            continue
        if _signature(nb.value) == _signature(b.value) or isinstance(nb.value, relax.Var):
            mapping[hv] = [old_ids[hv]]
            taken.add(old_ids[hv])
    # 2c. a removed alias (`lv = alloc` dropped by KillAfterLastUse) is what it aliased; a removed
    # `t[i]` of a tuple built from vars (`t = a, b`) is that var
    old_value_of = {_h(b.var): b.value for b in old_b}
    for b in old_b:
        hv, value = _h(b.var), b.value
        if hv in mapping:
            continue
        if isinstance(value, relax.TupleGetItem) and isinstance(value.tuple_value, relax.Var):
            tup = old_value_of.get(_h(value.tuple_value))
            if isinstance(tup, relax.Tuple) and 0 <= value.index < len(tup.fields):
                value = tup.fields[value.index]
        if isinstance(value, relax.Var) and _h(value) in mapping:
            mapping[hv] = list(mapping[_h(value)])

    # 2d. a survivor now aliasing a new, unclaimed binding: that binding does its work (listed
    # first, as it is the one computing)
    claimed = {n for names in mapping.values() for n in names}
    new_value = {_h(b.var): b.value for b in new_b}
    for hv, names in list(mapping.items()):
        alias = new_value.get(hv) if hv in new_names and names == [new_names[hv]] else None
        if isinstance(alias, relax.Var) and _h(alias) in new_value:
            target = new_names[_h(alias)]
            if target not in claimed:
                mapping[hv] = [target, *names]
                claimed.add(target)

    # 3. nearest surviving binding downstream, else upstream
    def nearest(start: int, edges: dict) -> list[str] | None:
        seen, queue = {start}, deque(edges.get(start, ()))
        while queue:
            x = queue.popleft()
            if x in seen:
                continue
            seen.add(x)
            if x in mapping:
                return mapping[x]
            queue.extend(edges.get(x, ()))
        return None

    fallback: dict[int, list[str]] = {}
    for v in old_vars:
        hv = _h(v)
        if hv not in mapping:
            found = nearest(hv, users)
            if found is None:
                found = nearest(hv, deps)
            fallback[hv] = found or []
    mapping.update(fallback)

    out: dict[str, list[str]] = {}
    for fx_name, names in provenance.items():
        result: list[str] = []
        for n in names:
            v = old_by_id.get(n)
            for m in (mapping.get(_h(v), []) if v is not None else []):
                if m not in result:
                    result.append(m)
        out[fx_name] = result
    return out


def relax_to_callee(step_or_mod, func: str = "main") -> dict[str, str]:
    """Binding var name -> global function it calls, for the bindings of ``func``:
    ``R.call_tir(f, ...)`` / ``call_tir_inplace`` -> f, ``R.call_dps_packed("ext", ...)`` -> "ext",
    a direct call of a module function (a fused Relax function, or a PrimFunc after
    CallTIRRewrite) -> its name, ``R.call_packed("ext", ...)`` -> "ext".

    After CallTIRRewrite the kernels are called destination-passing style (``add_one(x, alloc)``,
    result unused): a freshly allocated tensor maps to the first call that receives it (the kernel
    that writes it), and a plain alias of a mapped var (``a = alloc``) maps like it.  Bindings that
    call nothing global are left out.  Keys are ``binding_ids``, as in provenance."""
    mod = getattr(step_or_mod, "mod", step_or_mod)
    f = _func(mod, func)
    out: dict[str, str] = {}
    if f is None:
        return out
    ids = binding_ids(f)
    by_handle: dict[int, str] = {}
    fresh: set[int] = set()  # vars bound by alloc_tensor, not yet passed to a call
    for b in _bindings(f):
        value = b.value
        name = ids[_h(b.var)]
        if isinstance(value, relax.Var):
            callee = by_handle.get(_h(value))
            if callee is not None:
                out[name] = callee
                by_handle[_h(b.var)] = callee
            continue
        if not isinstance(value, relax.Call):
            continue
        op = value.op
        opname = getattr(op, "name", "") if not isinstance(op, (relax.GlobalVar, relax.ExternFunc)) else ""
        if isinstance(opname, str) and opname.endswith("alloc_tensor"):
            fresh.add(_h(b.var))
            continue
        callee = callee_name(op)
        if callee is None and value.args:
            callee = callee_name(value.args[0])
        if callee is None:
            continue
        out[name] = callee
        by_handle[_h(b.var)] = callee
        for arg in value.args:
            if isinstance(arg, relax.Var) and _h(arg) in fresh:
                fresh.discard(_h(arg))
                out[ids[_h(arg)]] = callee
                by_handle[_h(arg)] = callee
    return out
