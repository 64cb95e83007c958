"""Tile search on this machine: the CPUTuneConv2d and CPUTuneReductions passes.

For each conv2d kernel (CPUTileConv2d's blocks) and each matmul-like kernel (CPUTileReductions'
tiled blocks), a few tiles — vector factor × register tile, at most ``MAX_CANDIDATES``, the rule's
own first — are applied through the schedule rule that will use them, each built in a module of its
own and timed (``measuring``). The fastest is written into the kernel (``TILE_ATTR`` /
``REDUCTION_TILE_ATTR``) for that rule, with every candidate's time in ``TUNE_NOTE_ATTR``, so the
TensorIR view and the decisions show what was chosen and why. A candidate that fails to schedule,
build or run, or whose numbers differ from the first candidate's, is dropped with a note, never
chosen. Results are cached per machine (``decision_cache``), keyed by what the kernel computes.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from collections.abc import Callable

import tvm
from tvm import s_tir, tirx
from tvm.s_tir.dlight.analysis import normalize_prim_func

from irviz.core.schedules import rules as schedules
from irviz.core.schedules.matmul_tile import few_panels, k_block
from irviz.core.backend import timing
from irviz.core.backend.timing import add_tune_seconds
from irviz.core.tuning import conditions, measuring
from irviz.core.tuning.decision_cache import DecisionCache
from irviz.core.views.decisions import TUNE_NOTE_ATTR

MAX_CANDIDATES = 8
# Kernels with fewer multiply-adds than this (a few µs) are left to the rule: the candidates'
# differences would be below the timer's noise, and each candidate costs a build.
MIN_TUNE_WORK = 1 << 16


@dataclass(frozen=True)
class _Kind:
    """One kind of kernel to tune: how to find its tile extents, name what it computes, list the
    tiles to try, and which rules apply a tile."""
    record: str  # the decision's kind, as decisions_of reports it
    cache_prefix: str
    attr: str  # the function attr the rule reads the tile from
    extents: Callable  # func -> (a, b, block signature) or None: the extents the tile divides
    candidates: Callable  # (a, b, lanes) -> [{"vec", "reg"}]
    rules: tuple  # the rest of the pipeline, from the rule that reads the tile on: (name, make)
    lanes_param: str  # the rule that takes `lanes`


def _block_signature(sch, block_rv) -> str:
    """What a block computes, whatever was fused around it: the shapes it reads and writes and the
    dtype. A tile measured for a bare conv2d (LibraryDispatch's TensorIR side) is the tile for the
    same conv2d fused with its bias and relu."""
    block = sch.get(block_rv)
    shapes = [[int(d) if isinstance(d, tirx.IntImm) else str(d) for d in reg.source.shape]
              for reg in (*block.reads, *block.writes)]  # a symbolic size by its name
    return " ".join("x".join(map(str, sh)) for sh in shapes) + f" {block.writes[0].source.dtype}"


# ------------------------------------------------------------------------------------ conv2d
def _conv_extents(func):
    """(output channels, output width, signature) of the kernel's conv2d, if CPUTileConv2d blocks it."""
    sch = s_tir.Schedule(func)
    try:
        convs = schedules._conv_blocks(sch)
    except Exception:  # no root block (an extern kernel such as sort): no conv2d to tile
        return None
    if not convs:
        return None
    loops = sch.get_loops(convs[0][0])
    if len(loops) < 6:
        return None
    F, W = schedules._const(sch.get(loops[-6]).extent), schedules._const(sch.get(loops[-4]).extent)
    return (F, W, _block_signature(sch, convs[0][0])) if F and W else None


def conv_candidates(F: int, W: int, lanes: int) -> list[dict]:
    """Tiles to try, the rule's own first: vector factors of one, two or half a register, register
    tiles that divide the output width (at most 14 accumulators)."""
    default = {"vec": schedules._pick_factor(F, schedules.vector_choices(lanes)), "reg": schedules._reg_tile(W)}
    vecs = [v for v in (default["vec"], lanes, 2 * lanes, lanes // 2) if v and v >= 2 and F % v == 0]
    regs = [r for r in (default["reg"], 7, 14, 8, 4, 16, 2) if W % r == 0]
    out = [default] if default["vec"] else []
    for v in dict.fromkeys(vecs):
        for r in dict.fromkeys(regs):
            c = {"vec": v, "reg": r}
            if c not in out and v * r <= 16 * lanes:  # accumulators beyond the register file spill
                out.append(c)
    return out[:MAX_CANDIDATES]


# ------------------------------------------------------------------------- matmul-like reductions
def _reduction_extents(func):
    """(innermost spatial extent, the one before it, signature) of the kernel's first block that
    CPUTileReductions tiles matmul-style; None when there is none, or it is too small to measure."""
    sch = s_tir.Schedule(func)
    try:
        blocks = normalize_prim_func(sch)
    except Exception:  # no root block: nothing to tile
        return None
    for info in blocks or []:
        if not info.is_reduction() or schedules.reduction_kind(sch, info) != "tile":
            continue
        s_ext = [schedules._const(i.dom) for i in info.iters if i.kind == "S"]
        if any(e is None for e in s_ext) or schedules._work(sch, info.block_rv) < MIN_TUNE_WORK:
            return None
        r_ext = [schedules._const(i.dom) for i in info.iters if i.kind == "R"]
        return (s_ext[-1], (s_ext[-2] if len(s_ext) >= 2 else 1), _block_signature(sch, info.block_rv),
                r_ext[0] if len(r_ext) == 1 else None)
    return None


def reduction_candidates(N: int, M: int, lanes: int, K: int | None = None) -> list[dict]:
    """Tiles to try, the rule's own first, then (where the rule blocks a reduction of K for the L1)
    the rule's tile with the whole reduction in one block (kc 0): half a register to four registers along the innermost
    spatial loop (N), times 1–8 rows of the loop before it (M), nearest first to the accumulators
    that keep two FMA units busy without spilling: 12 of AVX2's 16 registers (two of B's vectors
    and A's broadcast take three more; 6 rows x 2 registers ran ViT's and BERT's matmuls 9–12%
    faster than 8 accumulators on a Zen 5), 16 of AVX-512's 32."""
    rule = schedules.reduction_tile_rule([M, N], lanes)
    if rule["vec"] is None:
        return []
    default = {"vec": rule["vec"], "reg": rule["reg"] or 1}
    vecs = [v for v in (lanes, 2 * lanes, 4 * lanes, lanes // 2) if v >= 4 and (N % v == 0 or N > 2 * v)]
    regs = [r for r in (8, 6, 4, 3, 2, 1) if M % r == 0 or M > 2 * r]  # rows not a multiple: padded
    ideal = 16 if lanes >= 16 else 12

    def accumulators(c):
        return max(c["vec"] // lanes, 1) * c["reg"]

    rest = [c for c in ({"vec": v, "reg": r} for v in vecs for r in regs)
            if c != default and accumulators(c) <= 2 * ideal]
    rest.sort(key=lambda c: (abs(accumulators(c) - ideal), -c["vec"]))
    rows = -(-M // default["reg"]) * default["reg"]
    # the rule blocks the reduction of row tiles only (one row: a matrix-vector product), and only
    # with panels enough for the threads (else "kc": 0 is the rule's tile again, one more build)
    blocks = default["reg"] > 1 and not few_panels(-(-N // default["vec"])) and k_block(K, default["vec"], rows)
    unblocked = [{**default, "kc": 0}] if blocks else []
    return [default, *unblocked, *rest][:MAX_CANDIDATES]


_TILE_REDUCTIONS = (("CPUTileReductions", schedules.tile_reductions),
                    ("CPUParallelVectorize", schedules.parallel_vectorize),
                    ("CPUPrepackWeights", schedules.prepack_weights))
CONV2D = _Kind("conv2d_tile", "conv2d-tile", schedules.TILE_ATTR, _conv_extents, conv_candidates,
               (("CPUTileConv2d", schedules.tile_conv2d), ("CPUInlineElementwise", schedules.inline_elementwise),
                *_TILE_REDUCTIONS), "CPUTileConv2d")
REDUCTION = _Kind("matmul_tile", "matmul-tile", schedules.REDUCTION_TILE_ATTR, _reduction_extents,
                  reduction_candidates, _TILE_REDUCTIONS, "CPUTileReductions")


# ------------------------------------------------------------------------------------ search
def time_candidates(small, inputs, tiles, attr: str, steps, params: dict) -> tuple[list[dict], float, list]:
    """Each tile of `tiles` set as `attr` on the one kernel of `small`, scheduled by `steps` and timed:
    ([the tile with its "ms" and "spread", or the "error" that dropped it], seconds spent, the
    timed blocks). A candidate whose numbers differ from the first that built is dropped too."""
    small_gv = measuring.kernel_of(small)
    t0 = time.perf_counter()
    tried, reference, blocks = [], None, []
    for tile in tiles:
        entry = dict(tile)
        try:
            tiled = schedules.with_functions(small, {small_gv: small[small_gv].with_attr(
                attr, tvm.runtime.convert(tile))})
            scheduled = measuring.apply_steps(tiled, steps, **params)
            with measuring.recorded() as mine:
                ms, out = measuring.build_and_time(scheduled, inputs)
        except Exception as exc:  # a candidate that fails is dropped, with why
            entry["error"] = measuring.first_line(exc)
        else:
            if reference is None:
                reference = out
            if not measuring.close(out, reference):
                entry["error"] = "numbers differ from the first candidate's"
            else:
                entry["ms"] = round(ms, 4)
                if mine:
                    entry["spread"] = round(mine[-1].spread, 3)
            blocks.extend(mine[-1:])
        tried.append(entry)
    seconds = time.perf_counter() - t0
    add_tune_seconds(seconds)
    return tried, seconds, blocks


def judged(rec: dict, blocks, load_before, tried, previous) -> dict:
    """`rec` with how its candidates were measured and, where that cannot be trusted, why it is
    provisional (``conditions``)."""
    return {**rec, **conditions.stamp(blocks, load_before, [(c["ms"], c.get("spread")) for c in tried if "ms" in c],
                                      previous)}


def search(mod, gv, kind: _Kind, lanes: int) -> dict | None:
    """Time the candidate tiles of kernel `gv`; the record (cached per machine and kernel), or None
    when the kernel has nothing of this kind to tile."""
    ext = kind.extents(mod[gv])
    single = measuring.kernel_module(mod, gv) if ext else None
    if single is None:
        return None
    small, inputs = single
    key = f"{kind.cache_prefix} {ext[2]} lanes{lanes}"
    cache = DecisionCache.shared()
    hit = cache.get(key)
    if hit is not None and isinstance(hit.get("choice"), dict):
        return {**hit, "cached": True}
    load = timing.load_average()
    tried, seconds, blocks = time_candidates(small, inputs, kind.candidates(ext[0], ext[1], lanes, *ext[3:]),
                                             kind.attr, kind.rules, {kind.lanes_param: {"lanes": lanes}})
    ok = [c for c in tried if "ms" in c]
    if not ok:
        return {"workload": key, "candidates": tried, "choice": None, "seconds": round(seconds, 3), "cached": False}
    best = min(ok, key=lambda c: c["ms"])
    rec = judged({"workload": key, "candidates": tried, "seconds": round(seconds, 3),
                  "choice": {k: v for k, v in best.items() if k not in ("ms", "spread")}},
                 blocks, load, tried, cache.previous(key))
    cache.put(key, rec)
    return {**rec, "cached": False}


def _tune_pass(kind: _Kind, name: str, lanes: int):
    n = schedules.target_lanes(lanes)

    @tvm.ir.transform.module_pass(opt_level=0, name=name)
    def _pass(mod, ctx):
        if "main" not in [g.name_hint for g in mod.get_global_vars()]:
            return mod
        updates = {}
        for gv, func in mod.functions.items():
            if not isinstance(func, tirx.PrimFunc) or (func.attrs is not None and kind.attr in func.attrs):
                continue
            if schedules.user_scheduled(func, gv.name_hint) is not None:
                continue  # its author's schedule: the rules leave it, so no tile to measure for them
            rec = search(mod, gv, kind, n)
            if rec is None:
                continue
            note = json.dumps({"kind": kind.record, **{k: v for k, v in rec.items() if k != "cached"}},
                              sort_keys=True)
            new = func.with_attr(TUNE_NOTE_ATTR, note)
            if rec["choice"] is not None:
                new = new.with_attr(kind.attr, tvm.runtime.convert(rec["choice"]))
            updates[gv] = new
        return schedules.with_functions(mod, updates)

    return _pass


def tune_conv2d(lanes: int = 0):
    """Module pass CPUTuneConv2d: measure tiles for each conv2d kernel; record the best on it."""
    return _tune_pass(CONV2D, "CPUTuneConv2d", lanes)


def tune_reductions(lanes: int = 0):
    """Module pass CPUTuneReductions: measure tiles for each matmul-like kernel; record the best on it."""
    return _tune_pass(REDUCTION, "CPUTuneReductions", lanes)
