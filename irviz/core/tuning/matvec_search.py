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

import tvm
from tvm import s_tir, tirx

from irviz.core.schedules import matvec as mv
from irviz.core.backend import timing
from irviz.core.schedules import rules as schedules
from irviz.core.tuning import measuring
from irviz.core.tuning.decision_cache import DecisionCache
from irviz.core.tuning.tile_search import MIN_TUNE_WORK, _block_signature, judged, time_candidates
from irviz.core.views.decisions import TUNE_NOTE_ATTR

MAX_CANDIDATES = 8
RECORD = "matvec_tile"
# The rule's own tile is kept unless another is faster by more than this: the kernels stream memory,
# so their tiles differ little, and repeated runs on a shared machine scatter by more than that.
# Keeping one panel width where speed cannot tell them apart lets the prefill and decode programs
# share one packed copy of a weight when the prefill's matmul tile packs it as wide.
KEEP_RULE_WITHIN = 0.10
# Where the prefill packs the same weight, a panel width of its own makes decode hold a second packed
# copy of it (Qwen2-0.5B's LM head: 545 MB); another width is taken only when it is this much faster.
SHARED_WIDTH_MARGIN = 0.25

_STEPS = (("CPUMatVec", mv.matvec),
          ("CPUTileReductions", schedules.tile_reductions),
          ("CPUParallelVectorize", schedules.parallel_vectorize),
          ("CPUPrepackWeights", schedules.prepack_weights))


def candidates(N: int, K: int, lanes: int, shared: int | None = None) -> list[dict]:
    """The rule's tile first, then the other panel widths, K unrolled by 4, and (for a weight the rule
    would keep on one thread, or spread) the other threading. `shared`: the panel width the prefill
    packs the weight with, taken as the rule's where it is one of the choices."""
    rule = mv.default_tile(N, K, lanes)
    if rule is None:
        return []
    if shared and N % shared == 0 and shared % lanes == 0:
        rule = {**rule, "nb": shared}
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


def _weight_param(func) -> int | None:
    """Index among `func`'s parameters of the weight its matrix-vector product reads."""
    sch = s_tir.Schedule(func)
    try:
        found = mv.matvec_block(sch)
    except Exception:
        return None
    if found is None:
        return None
    buf = sch.get(found[0].block_rv).reads[found[3]].source
    return next((i for i, p in enumerate(sch.mod["main"].params) if buf.same_as(p)), None)


def shared_width(mod, gv, panels: dict[str, int]) -> int | None:
    """The panel width `panels` (weight name -> width the prefill packs it with) gives the weight
    kernel `gv` reads, or None."""
    from irviz.core.schedules.weight_source import call_args_of, weight_of
    from irviz.core.tvm_compat import var_name

    if not panels or "main" not in [g.name_hint for g in mod.get_global_vars()]:
        return None
    main = mod["main"]
    index, args = _weight_param(mod[gv]), call_args_of(main, gv)
    if index is None or args is None or index >= len(args):
        return None
    names = [var_name(p) for p in main.params]
    # weights are main's parameters by name; which of them are inputs does not matter here
    name = weight_of(main, args[index], names)
    return panels.get(name) if name is not None else None


def parse_panels(text: str) -> dict[str, int]:
    """{weight: width} from "name=width,name=width"; ValueError on anything else."""
    out = {}
    for item in filter(None, (t.strip() for t in (text or "").split(","))):
        name, sep, width = item.partition("=")
        if not sep or not width.strip().isdigit() or int(width) <= 0:
            raise ValueError(f"panels: {item!r} is not weight=width (a positive panel width)")
        out[name.strip()] = int(width)
    return out


def search(mod, gv, lanes: int, shared: int | None = None) -> dict | None:
    """Time the candidates for kernel `gv`; the record (cached per machine and kernel), or None when
    it is no matrix-vector product worth measuring. `shared`: the panel width the prefill packs the
    kernel's weight with, kept unless another is faster by SHARED_WIDTH_MARGIN."""
    ext = _extents(mod[gv])
    single = measuring.kernel_module(mod, gv) if ext else None
    if single is None:
        return None
    small, inputs = single
    if not (shared and ext[0] % shared == 0 and shared % lanes == 0):
        shared = None
    key = f"matvec-tile {ext[2]} lanes{lanes}" + (f" shared{shared}" if shared else "")
    cache = DecisionCache.shared()
    hit = cache.get(key)
    if hit is not None and isinstance(hit.get("choice"), dict):
        return {**hit, "cached": True}
    load = timing.load_average()
    tried, seconds, blocks = time_candidates(small, inputs, candidates(ext[0], ext[1], lanes, shared),
                                             mv.MATVEC_ATTR, _STEPS, {"CPUMatVec": {"lanes": lanes}})
    ok = [c for c in tried if "ms" in c]
    best = min(ok, key=lambda c: c["ms"]) if ok else None
    rule = tried[0] if tried and "ms" in tried[0] else None
    if best is not None and rule is not None and rule["ms"] <= best["ms"] * (1 + KEEP_RULE_WITHIN):
        best = rule
    why = None
    if shared and best is not None:
        alike = [c for c in ok if c["nb"] == shared]
        kept = min(alike, key=lambda c: c["ms"]) if alike else None
        if kept is not None and best["nb"] != shared and kept["ms"] <= best["ms"] * (1 + SHARED_WIDTH_MARGIN):
            best = kept
        why = (f"the prefill packs this weight {shared} wide: " + (
            "kept, so both programs share one packed copy" if best["nb"] == shared else
            f"{best['nb']} wide measured faster by more than {SHARED_WIDTH_MARGIN:.0%}, "
            "so decode holds a packed copy of its own"))
    rec = {"workload": key, "candidates": tried, "seconds": round(seconds, 3),
           "choice": {k: best[k] for k in ("nb", "unroll", "par")} if best else None}
    if why:
        rec["shared_width"] = why
    if best:
        rec = judged(rec, blocks, load, tried, cache.previous(key))
        cache.put(key, rec)
    return {**rec, "cached": False}


def tune_matvec(lanes: int = 0, panels: str = ""):
    """Module pass CPUTuneMatVec: measure each matrix-vector kernel's tile; record the best on it.
    panels: "weight=width,..." the widths another program (the prefill) packs those weights with."""
    n = schedules.target_lanes(lanes)
    widths = parse_panels(panels)

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
            rec = search(mod, gv, n, shared_width(mod, gv, widths))
            if rec is None:
                continue
            note = json.dumps({"kind": RECORD, **{k: v for k, v in rec.items() if k != "cached"}}, sort_keys=True)
            new = func.with_attr(TUNE_NOTE_ATTR, note)
            if rec["choice"] is not None:
                new = new.with_attr(mv.MATVEC_ATTR, tvm.runtime.convert(rec["choice"]))
            updates[gv] = new
        return schedules.with_functions(mod, updates)

    return _pass
