"""CPUPrepackWeights: the weight re-layouts the conv and matmul rules put in their kernels move out
into PrimFuncs of their own (TVM's SplitLayoutRewritePreproc) and are folded on the constant
weights (FoldConstant), so a weight is re-laid-out once at compile time instead of on every run."""
from __future__ import annotations

import tvm
from tvm import s_tir, tirx

PREPROC_ATTR = "meta_schedule.layout_rewrite_preproc"  # what relax.transform.SplitLayoutRewritePreproc looks for
PREPACK_SUFFIX = "_weight_prepack"  # the name SplitLayoutRewritePreproc gives the split-off re-layout


def _child_blocks(func) -> list | None:
    """The blocks under `func`'s root block with their schedule, or None without a root block (an
    extern kernel such as sort)."""
    sch = s_tir.Schedule(func)
    try:
        root = sch.get_sblock("root")
    except Exception:
        return None
    return [sch.get(b) for b in sch.get_child_blocks(root)]


def _as_prepack(name: str, func):
    """The split-off re-layout kernel without the attributes it copied from the kernel it came out
    of: their notes (tiled, vectorized, epilogue fused) describe that kernel, not this one."""
    if not name.endswith(PREPACK_SUFFIX) or not isinstance(func, tirx.PrimFunc) or func.attrs is None:
        return func
    for key in [str(k) for k in func.attrs.keys() if str(k).startswith("irviz.")]:
        func = func.without_attr(key)
    kernel = name[: -len(PREPACK_SUFFIX)]
    return func.with_attr("irviz.schedule_notes", tvm.runtime.convert({
        "CPUPrepackWeights": f"the weight re-layout of {kernel}, moved out of it; runs on every call, "
                             f"as its weight is not a constant"}))


def prepack_weights():
    from tvm import relax

    fold = tvm.ir.transform.Sequential([relax.transform.FoldConstant(), relax.transform.DeadCodeElimination()])

    @tvm.ir.transform.module_pass(opt_level=0, name="CPUPrepackWeights")
    def _pass(mod, ctx):
        blocks = {gv: _child_blocks(f) for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)}
        if not any(PREPROC_ATTR in b.annotations for bs in blocks.values() for b in bs or ()):
            return mod
        # TVM's split reads every PrimFunc and stops at one whose root holds no block (an author's
        # own loops, e.g. index_put's): those have nothing to split and stay out of it
        aside = {gv: mod[gv] for gv, bs in blocks.items() if not bs}
        rest = tvm.IRModule({gv: f for gv, f in mod.functions.items() if gv not in aside}, attrs=mod.attrs)
        split = relax.transform.SplitLayoutRewritePreproc()(rest)
        funcs = {gv: _as_prepack(gv.name_hint, f) for gv, f in split.functions.items()}
        out = tvm.IRModule({**funcs, **aside}, attrs=split.attrs)
        with tvm.target.Target.from_device(tvm.cpu()):
            return fold(out)

    return _pass
