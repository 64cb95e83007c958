"""CPUMatVec: matrix-vector products against a weight (a decode step's matmuls, M = 1) scheduled to
stream the weight from memory at the bandwidth the machine has.

A decode step multiplies one row by each weight: every weight element is read once and used for
one multiply-add, so the kernel is bound by how fast the weight streams in, not by arithmetic. The
schedule therefore reads the weight exactly in the order it is stored:

- the weight K x N is re-laid-out once into N/nb x K x nb panels (a ``layout_rewrite_preproc``
  block that CPUPrepackWeights moves out and folds, or LiftTransformParams runs once), so a thread
  reads one contiguous stream per panel;
- each panel's nb outputs are nb/lanes vector accumulators (several independent FMA chains) kept
  in registers over the whole reduction, the K loop optionally unrolled, and its epilogue (bias,
  residual add, activation) applied as the panel is written back: no zero-init pass over the
  output, no second pass over it;
- panels are split over the threads, each thread a contiguous range of them.

The panel width (nb), the K unroll and whether to go parallel are measured on the machine by
CPUTuneMatVec (tuning.matvec_search) and cached per CPU; without a measurement the rule takes four
vectors per panel (or fewer when N has no such factor), no unroll, and parallel for weights of at
least PARALLEL_MIN_BYTES.
"""
from __future__ import annotations

from tvm import tirx
from tvm.s_tir.dlight.analysis import normalize_prim_func

from irviz.core.schedules import rules
from irviz.core.schedules.matmul_tile import _weight_read, accumulate_locally
from irviz.core.schedules.prepack import PREPROC_ATTR

RULE = "CPUMatVec"
MATVEC_ATTR = "irviz.matvec_tile"  # {"nb", "unroll", "par"} chosen by CPUTuneMatVec
# Weights smaller than this stay on one thread without a measurement: a parallel launch costs a few
# microseconds and, on a loaded machine, can wait for a descheduled worker (see rules.PARALLEL_MIN_WORK).
PARALLEL_MIN_BYTES = 4 << 20


def matvec_block(sch):
    """(block info, N, K, weight read index) of the function's matrix-vector product: one reduction
    block whose only spatial iter (dlight's normal form drops unit ones) runs over the weight's
    columns, one reduction iter over its rows, the weight a 2-D parameter; None when there is not
    exactly one."""
    blocks = normalize_prim_func(sch)
    if blocks is None:
        return None
    found = []
    for info in blocks:
        if not info.is_reduction():
            continue
        kinds = "".join(i.kind for i in info.iters)
        if kinds != "SR":
            return None  # another reduction shape (a batched or M > 1 matmul): not a matvec kernel
        index = _weight_read(sch, info.block_rv)
        N, K = (rules._const(i.dom) for i in info.iters)
        if index is None or N is None or K is None:
            return None
        found.append((info, N, K, index))
    return found[0] if len(found) == 1 else None


def matvec_extents(func):
    """(N, K) of `func`'s matrix-vector product, or None."""
    from tvm import s_tir

    try:
        found = matvec_block(s_tir.Schedule(func))
    except Exception:  # no root block (an extern kernel): nothing to schedule
        return None
    return (found[1], found[2]) if found else None


def panel_choices(N: int, lanes: int) -> list[int]:
    """Panel widths that divide N: one to eight vectors, four first (four FMA chains hide the FMA
    latency at one vector load per chain and step)."""
    return [lanes * a for a in (4, 2, 8, 1) if N % (lanes * a) == 0]


def default_tile(N: int, K: int, lanes: int) -> dict | None:
    choices = panel_choices(N, lanes)
    if not choices:
        return None
    return {"nb": choices[0], "unroll": 1, "par": int(N * K * 4 >= PARALLEL_MIN_BYTES)}


def tile_of(func) -> dict | None:
    if func is None or func.attrs is None or MATVEC_ATTR not in func.attrs:
        return None
    return {str(k): int(v) for k, v in func.attrs[MATVEC_ATTR].items()}


def schedule_matvec(sch, lanes: int, tile: dict | None = None) -> str | None:
    """Schedule the function's matrix-vector product (see the module doc); a note, or None when the
    function has none."""
    found = matvec_block(sch)
    if found is None:
        return None
    info, N, K, index = found
    rule = default_tile(N, K, lanes)
    if rule is None:
        return f"{info.name}: {N} outputs have no multiple of {lanes} lanes as a factor; left to CPUTileReductions"
    measured = bool(tile and N % tile["nb"] == 0 and tile["nb"] % lanes == 0
                    and K % max(tile["unroll"], 1) == 0)
    t = tile if measured else rule
    nb, unroll, par = t["nb"], max(int(t["unroll"]), 1), bool(t["par"])
    block = info.block_rv
    n, k = (i.loop_rv for i in info.iters)
    packed = sch.cache_read(block, index, "global")
    sch.transform_layout(block, ("read", index), lambda kk, nn: (nn // nb, kk, nn % nb))
    sch.annotate(packed, PREPROC_ATTR, 1)
    no, ni = sch.split(n, [None, nb])
    if unroll > 1:
        ko, ki = sch.split(k, [None, unroll])
        sch.reorder(no, ko, ki, ni)
    else:
        ko, ki = k, None
        sch.reorder(no, k, ni)
    epilogue = accumulate_locally(sch, block, no)
    sch.vectorize(ni)
    if ki is not None:
        sch.unroll(ki)
    if par:
        sch.parallel(no)
    sch.decompose_reduction(block, ko)
    return (f"{info.name}: matrix-vector, weight packed to N/{nb},K,{nb} ({nb // lanes} vector "
            f"accumulators of {lanes} lanes in registers), "
            + (f"K unrolled by {unroll}, " if unroll > 1 else "")
            + ("parallel over panels" if par else "one thread")
            + (" (tile measured)" if measured else "")
            + (f", {epilogue} epilogue block(s) fused into the write-back" if epilogue else ""))


def _has_reduction(func) -> bool:
    """Whether `func` holds a reduction block (only those can be matrix-vector products)."""
    stack = [func.body]
    while stack:
        node = stack.pop()
        block = getattr(node, "block", None)
        if block is not None and any(iv.iter_type == tirx.IterVar.CommReduce for iv in block.iter_vars):
            return True
        if isinstance(node, tirx.SeqStmt):
            stack.extend(node.seq)
            continue
        for field in ("body", "block"):
            child = getattr(node, field, None)
            if child is not None and isinstance(child, (tirx.Stmt,)):
                stack.append(child)
    return False


def matvec(lanes: int = 0):
    """Module pass CPUMatVec (see the module doc)."""
    n = rules.target_lanes(lanes)

    def apply(sch, func):
        return schedule_matvec(sch, n, tile_of(func)) if _has_reduction(func) else None

    return rules._per_function(RULE, apply)
