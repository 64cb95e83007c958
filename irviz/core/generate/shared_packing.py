"""One copy of a packed weight for both programs, where prefill and decode pack it the same way.

Each program's weight transforms (the CPU schedules' re-layouts, lifted into
``main_transform_params``) run once before generating, and each keeps its outputs for as long as it
generates: a weight both programs pack alike (Qwen2-0.5B's 545 MB LM head, packed in 64-wide panels
by both) would otherwise be held twice. Here each output of the two transform functions is named
by what it computes — which weights, through which kernels (compared by their TensorIR, not their
names) — and decode's transform is cut down to the outputs prefill does not already make; the
generator hands decode prefill's tensors for the rest.

    mod, from_prefill = share_transforms(prefill_mod, prefill_names, decode_mod, decode_names)
    weights = merged(own_outputs, prefill_outputs, from_prefill, total)
"""
from __future__ import annotations

TRANSFORM_PARAMS = "main_transform_params"


def _prim_key(func) -> str:
    """A PrimFunc named by what it computes: its attributes (notes naming the kernel it was split
    from) left out."""
    import tvm_ffi

    if func.attrs is not None:
        for k in [str(k) for k in func.attrs.keys()]:
            func = func.without_attr(k)
    return f"{tvm_ffi.structural_hash(func):x}"


def output_keys(mod, names: list[str]) -> list[str] | None:
    """Per output of `mod`'s TRANSFORM_PARAMS, a key naming what it computes from the weights
    `names` (the transform's parameters, in order); None when the function is not the shape
    LiftTransformParams makes (then nothing is shared)."""
    import tvm
    import tvm_ffi
    from tvm import relax

    gvs = {g.name_hint: g for g in mod.get_global_vars()}
    if TRANSFORM_PARAMS not in gvs:
        return None
    func = mod[gvs[TRANSFORM_PARAMS]]
    body = func.body
    if not isinstance(body, relax.SeqExpr):
        return None
    bound = {b.var: b.value for block in body.blocks for b in block.bindings if isinstance(b, relax.VarBinding)}
    params = list(func.params)
    memo: dict = {}

    def named(gv) -> str:  # a function by what it computes, not its name
        return _prim_key(mod[gv]) if gv.name_hint in gvs else gv.name_hint

    def key(e) -> str:
        if e in memo:
            return memo[e]
        if isinstance(e, relax.Var) and e in bound:
            out = key(bound[e])
        elif isinstance(e, relax.Var):
            # the weights come as one tuple parameter (or one parameter each)
            out = f"p{[p.same_as(e) for p in params].index(True)}" if any(p.same_as(e) for p in params) else "?"
        elif isinstance(e, relax.TupleGetItem):
            inner = key(e.tuple_value)
            out = f"w:{names[e.index]}" if inner == "p0" and len(params) == 1 and e.index < len(names) \
                else f"{inner}[{e.index}]"
        elif isinstance(e, relax.Tuple):
            out = "(" + ",".join(key(f) for f in e.fields) + ")"
        elif isinstance(e, relax.Call):
            callee = e.op
            head = named(callee) if isinstance(callee, tvm.ir.GlobalVar) else str(getattr(callee, "name", callee))
            args = ",".join(named(a) if isinstance(a, tvm.ir.GlobalVar) else key(a) for a in e.args)
            out = f"{head}({args})->{e.ty}"
        else:
            out = f"c{tvm_ffi.structural_hash(e):x}"
        memo[e] = out
        return out

    result = body.body
    while isinstance(result, relax.Var) and result in bound:
        result = bound[result]
    if not isinstance(result, relax.Tuple):
        return None
    if len(params) != 1 and len(params) != len(names):
        return None
    if len(params) == len(names) and len(params) != 1:
        memo.update({p: f"w:{n}" for p, n in zip(params, names)})
    return [key(f) for f in result.fields]


def share_transforms(prefill_mod, prefill_names, decode_mod, decode_names):
    """(decode's module, {decode output index: prefill output index}): the module with its
    TRANSFORM_PARAMS returning only the outputs prefill's does not compute alike, or `decode_mod`
    and {} when none is shared (or either transform is not one this can read)."""
    from tvm import relax

    pre, dec = output_keys(prefill_mod, prefill_names), output_keys(decode_mod, decode_names)
    if not pre or not dec:
        return decode_mod, {}
    where = {k: i for i, k in enumerate(pre)}
    # a weight passed through unchanged is the caller's tensor in both programs: nothing to gain
    shared = {i: where[k] for i, k in enumerate(dec) if k in where and not k.startswith("w:")}
    if not shared:
        return decode_mod, {}
    keep = [i for i in range(len(dec)) if i not in shared]
    return _keep_outputs(decode_mod, keep, relax), shared


def _keep_outputs(mod, keep: list[int], relax):
    """`mod` with TRANSFORM_PARAMS returning only its outputs `keep` (in order), and what only the
    dropped ones needed removed."""
    import tvm

    gv = next(g for g in mod.get_global_vars() if g.name_hint == TRANSFORM_PARAMS)
    func = mod[gv]
    body = func.body
    out_var = body.body
    blocks = list(body.blocks)
    last = blocks[-1]
    bindings = list(last.bindings)
    at = next(i for i, b in enumerate(bindings) if b.var.same_as(out_var))
    fields = [bindings[at].value.fields[i] for i in keep]
    new_var = relax.Var(out_var.name, relax.TupleType([f.ty for f in fields]))
    bindings[at] = relax.VarBinding(new_var, relax.Tuple(fields))
    block = relax.DataflowBlock(bindings) if isinstance(last, relax.DataflowBlock) else relax.BindingBlock(bindings)
    seq = relax.SeqExpr([*blocks[:-1], block], new_var)
    new = relax.Function(func.params, seq, new_var.ty, func.is_pure, func.attrs)
    out = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
    out[gv] = new
    entries = [g.name_hint for g in out.get_global_vars() if isinstance(out[g], relax.Function)]
    return relax.transform.DeadCodeElimination(entries)(out)


def merged(own: list, donor: list, from_donor: dict[int, int], total: int) -> list:
    """All `total` transformed weights in order: donor[from_donor[i]] where shared, else the next of
    `own` (the cut-down transform's outputs, in order)."""
    it = iter(own)
    out = [donor[from_donor[i]] if i in from_donor else next(it) for i in range(total)]
    if next(it, None) is not None:
        raise ValueError("the cut-down weight transform returned more outputs than its program takes")
    return out


def decode_passes(passes: list, prefill) -> list:
    """`passes` (decode's pipeline) with CPUTuneMatVec told the panel width the prefill program packs
    each weight with, so decode's matrix-vector kernels pack it alike and share prefill's copy."""
    from irviz.core.passes.registry import as_invocation
    from irviz.core.schedules.weight_source import packed_widths

    out = [as_invocation(p) for p in passes]
    tune = [p for p in out if p.name == "CPUTuneMatVec" and not p.params.get("panels")]
    if not tune:
        return out
    widths = packed_widths(prefill.session.module(), prefill.weight_names())
    text = ",".join(f"{name}={w}" for name, w in sorted(widths.items()))
    for p in tune:
        p.params["panels"] = text
    return out
