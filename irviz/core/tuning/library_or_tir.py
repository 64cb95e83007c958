"""Library or TensorIR, measured on this machine, not decided by constants from another one.

* :func:`library_or_tir` — for one conv2d / matmul call: build the call alone both ways (a torch
  library call through ``call_dps_packed``, and TensorIR through the rest of the CPU pipeline, tile
  search included), time each on random inputs of the real shapes, keep the faster.
  LibraryDispatch(measure=True) uses it.
* :func:`mixture_or_tir` — the whole model with those choices against all TensorIR.
* :func:`with_decisions` — keeps the records on the module, where ``views.decisions`` reads them.

A torch call that raises, or TensorIR whose numbers differ from torch's, is never chosen, and the
decision says why. Results are cached per machine (``decision_cache``).
"""
from __future__ import annotations

import json
import time

import tvm
from tvm import relax

from irviz.core.schedules import layout_fusion, matvec
from irviz.core.schedules import rules as schedules
from irviz.core.backend.legalize import CUSTOM_LEGALIZE_MAP
from irviz.core.backend import timing
from irviz.core.backend.timing import add_tune_seconds, tune_seconds
from irviz.core.frontend.inputs import random_inputs
from irviz.core.tuning import conditions, matvec_search, measuring, tile_search
from irviz.core.tuning.decision_cache import DecisionCache
from irviz.core.tvm_compat import structural_hash
from irviz.core.views.decisions import DECISIONS_ATTR, workload_key

RT = relax.transform

# What a call kept in TensorIR goes through in fast-cpu / tir-cpu: the zero pipeline, then the CPU
# schedule rules, as (pass name, make) pairs (tests/core/test_cpu_decisions.py checks the names
# against the pipelines).
TIR_STEPS = (
    ("LegalizeOps", lambda: RT.LegalizeOps(customize_legalize_map=dict(CUSTOM_LEGALIZE_MAP))),
    ("AnnotateTIROpPattern", RT.AnnotateTIROpPattern),
    ("CPUFuseLayoutOps", layout_fusion.fuse_layout_ops),
    ("FoldConstant", RT.FoldConstant),
    ("FuseOps", lambda: RT.FuseOps(-1)),
    ("FuseTIR", RT.FuseTIR),
    ("CPUTuneConv2d", tile_search.tune_conv2d),
    ("CPUTileConv2d", schedules.tile_conv2d),
    ("CPUInlineElementwise", schedules.inline_elementwise),
    ("CPUTuneMatVec", matvec_search.tune_matvec),
    ("CPUMatVec", matvec.matvec),
    ("CPUTuneReductions", tile_search.tune_reductions),
    ("CPUTileReductions", schedules.tile_reductions),
    ("CPUParallelVectorize", schedules.parallel_vectorize),
    ("CPUPrepackWeights", schedules.prepack_weights),
)


# ------------------------------------------------------------------------- library or TensorIR
def library_or_tir(call, library_module) -> dict:
    """Measure one call both ways; returns the decision record (cached per machine and workload).

    `library_module(mod) -> mod`: the call sent to torch (LibraryDispatch with no thresholds)."""
    key = workload_key(call)
    cache = DecisionCache.shared()
    hit = cache.get(key)
    if hit is not None and hit.get("choice") in ("torch", "tir"):
        return {**hit, "cached": True}
    t0, nested = time.perf_counter(), tune_seconds()
    rec = {"workload": key, "torch_ms": None, "tir_ms": None, "choice": None, "notes": []}
    # TVM tensors, which both builds take as they are: a 2 GB LM head is drawn once, not copied per build
    single = measuring.single_call_module(call, tensors=True)
    if single is None:  # symbolic sizes: nothing to time, LegalizeOps lowers it
        return {**rec, "choice": "tir", "notes": ["sizes are symbolic; left to TensorIR"], "cached": False}
    mod, inputs = single
    torch_out = tir_out = None
    load, blocks, spreads = timing.load_average(), [], {}
    # TensorIR first (its tile search times candidates too), torch after the pools settle: neither
    # is timed beside the other runtime's still-spinning threads
    try:
        rec["tir_ms"], tir_out = _timed(measuring.apply_steps(mod, TIR_STEPS), inputs, "tir_ms", blocks, spreads)
    except Exception as exc:
        rec["notes"].append(f"TensorIR failed: {measuring.first_line(exc)}")
    measuring.settle()
    try:
        rec["torch_ms"], torch_out = _timed(library_module(mod), inputs, "torch_ms", blocks, spreads)
    except Exception as exc:  # a library call that raises is never chosen
        rec["notes"].append(f"torch call failed: {measuring.first_line(exc)}")
    if tir_out is not None and torch_out is not None and not measuring.close(tir_out, torch_out):
        rec["notes"].append("TensorIR and torch disagree on this call; kept torch")
        rec["tir_ms"] = None
    if rec["torch_ms"] is None and rec["tir_ms"] is None:
        rec["choice"] = "tir"  # nothing measured: leave the op where it was, LegalizeOps lowers it
        rec["notes"].append("neither way could be measured; left to TensorIR")
    elif rec["tir_ms"] is None or (rec["torch_ms"] is not None and rec["torch_ms"] < rec["tir_ms"]):
        rec["choice"] = "torch"
    else:
        rec["choice"] = "tir"
    rec = _judged(rec, blocks, load, spreads, cache.previous(key))
    seconds = time.perf_counter() - t0
    add_tune_seconds(seconds - (tune_seconds() - nested))  # the tile search inside counted itself
    rec["seconds"] = round(seconds, 3)
    if rec["torch_ms"] is not None or rec["tir_ms"] is not None:
        cache.put(key, rec)
    return {**rec, "cached": False}


def _timed(mod, inputs, side: str, blocks: list, spreads: dict):
    """build_and_time of an already scheduled module (a tile search inside the scheduling is a
    decision of its own), keeping its timed block and the spread of its runs under `side`."""
    with measuring.recorded() as mine:
        ms, out = measuring.build_and_time(mod, inputs)
    if mine:
        blocks.append(mine[-1])
        spreads[side] = round(mine[-1].spread, 3)
    return ms, out


def _judged(rec: dict, blocks, load, spreads: dict, previous) -> dict:
    """`rec` with how torch and TensorIR were measured and, where that cannot be trusted, why the
    choice is provisional (``conditions``)."""
    options = [(rec[side], spreads.get(side)) for side in ("torch_ms", "tir_ms")]
    return {**rec, **conditions.stamp(blocks, load, options, previous)}


def mixture_or_tir(original, mixed, records: list[dict]):
    """Whole model: the per-call choices together against all TensorIR, built through the rest of
    the pipeline and timed on random inputs; the faster module. A conv2d sent to torch loses the
    bias / batch-norm / relu TensorIR fuses into it, which timing the call alone does not see.
    `records` (the per-call decisions) get a note when the whole model overrules them."""
    if not any(r["choice"] == "torch" for r in records):
        return mixed, None
    try:
        inputs = random_inputs(mixed)
    except Exception:  # symbolic sizes or non-tensor parameters: per call only
        return mixed, None
    key = f"model {structural_hash(original) & 0xFFFFFFFFFFFF:x} " + ",".join(
        sorted(r["workload"] for r in records if r["choice"] == "torch"))
    cache = DecisionCache.shared()
    rec = cache.get(key)
    if rec is None or rec.get("choice") not in ("torch", "tir"):
        t0, nested = time.perf_counter(), tune_seconds()
        rec = {"workload": "whole model: these calls in torch, the rest TensorIR, against all TensorIR",
               "torch_ms": None, "tir_ms": None, "choice": "torch", "notes": []}
        outs, load, blocks, spreads = {}, timing.load_average(), [], {}
        for side, mod in (("tir_ms", original), ("torch_ms", mixed)):
            measuring.settle()
            try:
                rec[side], outs[side] = _timed(measuring.apply_steps(mod, TIR_STEPS), inputs, side, blocks, spreads)
            except Exception as exc:
                rec["notes"].append(f"{'mixture' if side == 'torch_ms' else 'all TensorIR'} failed: {measuring.first_line(exc)}")
        if len(outs) == 2 and not measuring.close(outs["tir_ms"], outs["torch_ms"]):
            rec["notes"].append("the two give different numbers; kept the per-call choices")
        elif rec["tir_ms"] is not None and (rec["torch_ms"] is None or rec["tir_ms"] <= rec["torch_ms"]):
            rec["choice"] = "tir"
        rec = _judged(rec, blocks, load, spreads, cache.previous(key))
        seconds = time.perf_counter() - t0
        add_tune_seconds(seconds - (tune_seconds() - nested))
        rec["seconds"] = round(seconds, 3)
        cache.put(key, rec)
    else:
        rec = {**rec, "cached": True}
    rec = {**rec, "kind": "whole_model"}
    if rec["choice"] == "tir":
        for r in records:
            if r["choice"] == "torch":
                r["choice"] = "tir"
                r["notes"] = list(r.get("notes") or []) + ["the whole model ran faster all in TensorIR"]
        return original, rec
    return mixed, rec


def with_decisions(mod, records: list[dict]):
    """Keep the records on the module, where a step's IR (and `decisions_of`) can show them."""
    if not records:
        return mod
    old = [str(x) for x in mod.attrs[DECISIONS_ATTR]] if mod.attrs is not None and DECISIONS_ATTR in mod.attrs else []
    new = old + [json.dumps({k: v for k, v in r.items() if k != "cached"}, sort_keys=True) for r in records]
    return mod.with_attr(DECISIONS_ATTR, tvm.runtime.convert(new))
