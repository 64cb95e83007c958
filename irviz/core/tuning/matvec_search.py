"""CPUTuneMatVec: the panel width, K unroll and threading of each matrix-vector kernel (CPUMatVec's),
measured on this machine and cached per CPU (``decision_cache``), as CPUTuneReductions does for
matmul tiles.

Each candidate is the kernel alone through the rest of the CPU rules (its weight a constant, so
CPUPrepackWeights packs it at compile time, as generation lifts the packing out of the step),
built and timed; a candidate that fails or whose numbers differ from the first one's is dropped
with a note. The choice goes into the kernel (``MATVEC_ATTR``) with every candidate's time
(``TUNE_NOTE_ATTR``), so the TensorIR view and the decisions show what was chosen and why.
"""
from __future__ import annotations

import json
import time

import tvm
from tvm import s_tir, tirx

from irviz.core.backend.timing import add_tune_seconds
from irviz.core.schedules import matvec as mv
from irviz.core.schedules import rules as schedules
from irviz.core.tuning import measuring
from irviz.core.tuning.decision_cache import DecisionCache
from irviz.core.tuning.tile_search import MIN_TUNE_WORK, _block_signature
from irviz.core.views.decisions import TUNE_NOTE_ATTR

MAX_CANDIDATES = 8
RECORD = "matvec_tile"
# The rule's own tile is kept unless another is faster by more than this: the kernels stream memory,
# so their tiles differ little, and repeated runs on a shared machine scatter by more than that.
# Keeping one panel width where speed cannot tell them apart lets the prefill and decode programs
# share one packed copy of a weight when the prefill's matmul tile packs it as wide.
KEEP_RULE_WITHIN = 0.10

_STEPS = (("CPUMatVec", mv.matvec),
          ("CPUTileReductions", schedules.tile_reductions),
          ("CPUParallelVectorize", schedules.parallel_vectorize),
          ("CPUPrepackWeights", schedules.prepack_weights))


def candidates(N: int, K: int, lanes: int) -> list[dict]:
    """The rule's tile first, then the other panel widths, K unrolled by 4, and (for a weight the rule
    would keep on one thread, or spread) the other threading."""
    rule = mv.default_tile(N, K, lanes)
    if rule is None:
        return []
    out = [rule]
    for nb in mv.panel_choices(N, lanes):
        for unroll in (1, 4):
            if K % unroll == 0:
                c = {"nb": nb, "unroll": unroll, "par": rule["par"]}
                if c not in out:
                    out.append(c)
    out.insert(1, {**rule, "par": 1 - rule["par"]})
    return out[:MAX_CANDIDATES]


def _extents(func):
    """(N, K, signature) of the kernel's matrix-vector product when it is worth measuring."""
    sch = s_tir.Schedule(func)
    try:
        found = mv.matvec_block(sch)
    except Exception:  # no root block: nothing to schedule
        return None
    if found is None:
        return None
    info, N, K, _ = found
    if N * K < MIN_TUNE_WORK:
        return None
    return N, K, _block_signature(sch, info.block_rv)


def search(mod, gv, lanes: int) -> dict | None:
    """Time the candidates for kernel `gv`; the record (cached per machine and kernel), or None when
    it is no matrix-vector product worth measuring."""
    ext = _extents(mod[gv])
    single = measuring.kernel_module(mod, gv) if ext else None
    if single is None:
        return None
    small, inputs = single
    small_gv = measuring.kernel_of(small)
    key = f"matvec-tile {ext[2]} lanes{lanes}"
    cache = DecisionCache.shared()
    hit = cache.get(key)
    if hit is not None and isinstance(hit.get("choice"), dict):
        return {**hit, "cached": True}
    t0 = time.perf_counter()
    tried, reference = [], None
    for tile in candidates(ext[0], ext[1], lanes):
        entry = dict(tile)
        try:
            tiled = schedules.with_functions(small, {small_gv: small[small_gv].with_attr(
                mv.MATVEC_ATTR, tvm.runtime.convert(tile))})
            ms, out = measuring.build_and_time(
                measuring.apply_steps(tiled, _STEPS, CPUMatVec={"lanes": lanes}), inputs)
        except Exception as exc:  # a candidate that fails is dropped, with why
            entry["error"] = measuring.first_line(exc)
        else:
            if reference is None:
                reference = out
            if not measuring.close(out, reference):
                entry["error"] = "numbers differ from the first candidate's"
            else:
                entry["ms"] = round(ms, 4)
        tried.append(entry)
    seconds = time.perf_counter() - t0
    add_tune_seconds(seconds)
    ok = [c for c in tried if "ms" in c]
    best = min(ok, key=lambda c: c["ms"]) if ok else None
    rule = tried[0] if tried and "ms" in tried[0] else None
    if best is not None and rule is not None and rule["ms"] <= best["ms"] * (1 + KEEP_RULE_WITHIN):
        best = rule
    rec = {"workload": key, "candidates": tried, "seconds": round(seconds, 3),
           "choice": {k: best[k] for k in ("nb", "unroll", "par")} if best else None}
    if best:
        cache.put(key, rec)
    return {**rec, "cached": False}


def tune_matvec(lanes: int = 0):
    """Module pass CPUTuneMatVec: measure each matrix-vector kernel's tile; record the best on it."""
    n = schedules.target_lanes(lanes)

    @tvm.ir.transform.module_pass(opt_level=0, name="CPUTuneMatVec")
    def _pass(mod, ctx):
        if "main" not in [g.name_hint for g in mod.get_global_vars()]:
            return mod
        updates = {}
        for gv, func in mod.functions.items():
            if not isinstance(func, tirx.PrimFunc) or (func.attrs is not None and mv.MATVEC_ATTR in func.attrs):
                continue
            if schedules.user_scheduled(func, gv.name_hint) is not None:
                continue
            rec = search(mod, gv, n)
            if rec is None:
                continue
            note = json.dumps({"kind": RECORD, **{k: v for k, v in rec.items() if k != "cached"}}, sort_keys=True)
            new = func.with_attr(TUNE_NOTE_ATTR, note)
            if rec["choice"] is not None:
                new = new.with_attr(mv.MATVEC_ATTR, tvm.runtime.convert(rec["choice"]))
            updates[gv] = new
        return schedules.with_functions(mod, updates)

    return _pass
