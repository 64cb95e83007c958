"""Library or TensorIR, measured on this machine, not decided by constants from another one.

* :func:`library_or_tir` — for one conv2d / matmul call: build the call alone both ways (a torch
  library call through ``call_dps_packed``, and TensorIR through the rest of the CPU pipeline, tile
  search included), time each on random inputs of the real shapes, keep the faster.
  LibraryDispatch(measure=True) uses it.
* :func:`mixture_or_tir` — the whole model with those choices against all TensorIR.
* :func:`decisions_of`, :func:`kernel_decisions` — what the views show of these decisions and of
  the tile search (``tile_search``).

A torch call that raises, or TensorIR whose numbers differ from torch's, is never chosen, and the
decision says why. Results are cached per machine (``decision_cache``).
"""
from __future__ import annotations

import json
import time

import tvm
from tvm import relax, tirx

from irviz.core.backend.timing import add_tune_seconds, tune_seconds
from irviz.core.passes import measuring
from irviz.core.passes.decision_cache import DecisionCache
from irviz.core.passes.tile_search import TUNE_NOTE_ATTR, describe_tile
from irviz.core.tvm_compat import GenericConst

DECISIONS_ATTR = "irviz.decisions"  # module attr: JSON records of LibraryDispatch's measured choices

# the steps a call kept in TensorIR goes through in fast-cpu / tir-cpu
TIR_STEPS = ("LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR",
             "CPUTuneConv2d", "CPUTileConv2d", "CPUInlineElementwise", "CPUTuneReductions",
             "CPUTileReductions", "CPUParallelVectorize", "CPUPrepackWeights")


# ------------------------------------------------------------------------------------ workloads
def workload_key(call) -> str:
    """A readable key of a conv2d / matmul call, or of the call_dps_packed LibraryDispatch made of
    one: op, operand shapes (c: a constant), dtype and, for conv2d, stride/padding/dilation/groups
    as the library function's name spells them."""
    from irviz.core.passes import library_dispatch as dispatch

    if call.op.same_as(tvm.ir.Op.get("relax.call_dps_packed")):
        name = str(call.args[0].global_symbol)
        op, _, attrs = name[len(dispatch.PREFIX):].partition(".")
        args = list(call.args[1].fields)
    else:
        op = call.op.name.split(".")[-1]
        attrs = dispatch.conv2d_name(call)[len(dispatch.PREFIX + "conv2d."):] if op == "conv2d" else ""
        args = list(call.args)
    shapes = "*".join("x".join(map(str, measuring.shape_of(a.ty) or ["?"])) + ("c" if isinstance(a, GenericConst) else "")
                      for a in args)
    return f"{op} {shapes} {call.ty.dtype}" + (f" {attrs}" if attrs else "")


def decision_texts(mod, func: str = "main") -> dict[str, str]:
    """{binding var name: what LibraryDispatch measured for it} for the calls of `func`."""
    from irviz.core.tvm_compat import var_name

    by_key = {d["workload"]: d for d in decisions_of(mod) if d["kind"] == "library_or_tir"}
    if not by_key or func not in [g.name_hint for g in mod.get_global_vars()]:
        return {}
    out = {}
    fn = mod[func]
    for block in getattr(fn.body, "blocks", []):
        for b in block.bindings:
            v = getattr(b, "value", None)
            if not isinstance(v, relax.Call) or not isinstance(v.op, tvm.ir.Op):
                continue
            if v.op.name not in ("relax.nn.conv2d", "relax.matmul", "relax.call_dps_packed"):
                continue
            try:
                rec = by_key.get(workload_key(v))
            except Exception:  # noqa: BLE001 - a call_dps_packed to something else
                rec = None
            if rec is not None:
                out[var_name(b.var)] = describe_decision(rec)
    return out


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
    single = measuring.single_call_module(call)
    if single is None:  # symbolic sizes: nothing to time, LegalizeOps lowers it
        return {**rec, "choice": "tir", "notes": ["sizes are symbolic; left to TensorIR"], "cached": False}
    mod, inputs = single
    torch_out = tir_out = None
    try:
        rec["torch_ms"], torch_out = measuring.build_and_time(library_module(mod), inputs)
    except Exception as exc:  # noqa: BLE001 - a library call that raises is never chosen
        rec["notes"].append(f"torch call failed: {measuring.first_line(exc)}")
    try:
        rec["tir_ms"], tir_out = measuring.build_and_time(measuring.apply_passes(mod, TIR_STEPS), inputs)
    except Exception as exc:  # noqa: BLE001
        rec["notes"].append(f"TensorIR failed: {measuring.first_line(exc)}")
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
    seconds = time.perf_counter() - t0
    add_tune_seconds(seconds - (tune_seconds() - nested))  # the tile search inside counted itself
    rec["seconds"] = round(seconds, 3)
    if rec["torch_ms"] is not None or rec["tir_ms"] is not None:
        cache.put(key, rec)
    return {**rec, "cached": False}


def mixture_or_tir(original, mixed, records: list[dict]):
    """Whole model: the per-call choices together against all TensorIR, built through the rest of
    the pipeline and timed on random inputs; the faster module. A conv2d sent to torch loses the
    bias / batch-norm / relu TensorIR fuses into it, which timing the call alone does not see.
    `records` (the per-call decisions) get a note when the whole model overrules them."""
    from irviz.core.backend.run import random_inputs
    from irviz.core.tvm_compat import structural_hash

    if not any(r["choice"] == "torch" for r in records):
        return mixed, None
    try:
        inputs = random_inputs(mixed)
    except Exception:  # noqa: BLE001 - symbolic sizes or non-tensor parameters: per call only
        return mixed, None
    key = f"model {structural_hash(original) & 0xFFFFFFFFFFFF:x} " + ",".join(
        sorted(r["workload"] for r in records if r["choice"] == "torch"))
    cache = DecisionCache.shared()
    rec = cache.get(key)
    if rec is None or rec.get("choice") not in ("torch", "tir"):
        t0, nested = time.perf_counter(), tune_seconds()
        rec = {"workload": "whole model: these calls in torch, the rest TensorIR, against all TensorIR",
               "torch_ms": None, "tir_ms": None, "choice": "torch", "notes": []}
        outs = {}
        for side, mod in (("torch_ms", mixed), ("tir_ms", original)):
            try:
                rec[side], outs[side] = measuring.build_and_time(measuring.apply_passes(mod, TIR_STEPS), inputs)
            except Exception as exc:  # noqa: BLE001
                rec["notes"].append(f"{'mixture' if side == 'torch_ms' else 'all TensorIR'} failed: {measuring.first_line(exc)}")
        if len(outs) == 2 and not measuring.close(outs["tir_ms"], outs["torch_ms"]):
            rec["notes"].append("the two give different numbers; kept the per-call choices")
        elif rec["tir_ms"] is not None and (rec["torch_ms"] is None or rec["tir_ms"] <= rec["torch_ms"]):
            rec["choice"] = "tir"
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


def describe_decision(rec: dict) -> str:
    """"torch 1.21 ms · TIR 0.88 ms → TIR" (what the tooltip and the kernel table show)."""
    fmt = lambda ms: "failed" if ms is None else f"{ms:.3g} ms"  # noqa: E731
    text = f"torch {fmt(rec.get('torch_ms'))} · TIR {fmt(rec.get('tir_ms'))} → {'TIR' if rec.get('choice') == 'tir' else 'torch'}"
    if rec.get("cached"):
        text += " (cached)"
    if rec.get("notes"):
        text += "; " + "; ".join(rec["notes"])
    return text


def with_decisions(mod, records: list[dict]):
    """Keep the records on the module, where a step's IR (and `decisions_of`) can show them."""
    if not records:
        return mod
    old = [str(x) for x in mod.attrs[DECISIONS_ATTR]] if mod.attrs is not None and DECISIONS_ATTR in mod.attrs else []
    new = old + [json.dumps({k: v for k, v in r.items() if k != "cached"}, sort_keys=True) for r in records]
    return mod.with_attr(DECISIONS_ATTR, tvm.runtime.convert(new))


def decisions_of(mod) -> list[dict]:
    """The measured decisions a module carries: LibraryDispatch's per call, the tile searches' per
    kernel (kind "conv2d_tile" or "matmul_tile")."""
    out = []
    if mod.attrs is not None and DECISIONS_ATTR in mod.attrs:
        for s in mod.attrs[DECISIONS_ATTR]:
            try:
                out.append({"kind": "library_or_tir", **json.loads(str(s))})  # a record's own kind wins
            except ValueError:
                continue
    for gv, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc) and func.attrs is not None and TUNE_NOTE_ATTR in func.attrs:
            try:
                out.append({"kind": "conv2d_tile", **json.loads(str(func.attrs[TUNE_NOTE_ATTR])), "kernel": gv.name_hint})
            except ValueError:
                continue
    return out


def _dims(text: str) -> list[int]:
    return [int(x) for x in text.rstrip("c").split("x")] if text and text != "?" else []


def _library_record_for_tile(tile: dict, library: list[dict]) -> dict | None:
    """The LibraryDispatch decision for the call a tiled kernel computes, matched by shapes: the tile
    signature (the shapes the conv2d / matmul block read, taken before tiling) against the call's
    operand shapes, a conv2d's input padded as its attributes say."""
    parts = tile.get("workload", "").split()
    if len(parts) < 3:
        return None
    reads = [_dims(s) for s in parts[1:-2]]  # "conv2d-tile IN W OUT float32 lanes8": the shapes
    for rec in library:
        fields = rec["workload"].split()  # "conv2d 1x64x56x56*64x64x3x3c float32 s1_1.p1_1.d1_1.g1"
        if len(fields) < 3:
            continue
        op, shapes, attrs = fields[0], fields[1], fields[3:]
        operands = [_dims(s) for s in shapes.split("*")]
        if tile["kind"] == "matmul_tile" and op == "matmul" and reads[:2] == operands[:2]:
            return rec
        if (tile["kind"] == "conv2d_tile" and op == "conv2d" and len(operands) == 2 and len(operands[0]) == 4
                and len(reads) >= 2 and attrs):
            pads = [int(p) for p in attrs[0].split(".")[1][1:].split("_")]  # s1_1.p1_1.d1_1.g1
            (n, c, h, w), weight = operands
            if reads[1] == weight and reads[0] == [n, c, h + 2 * pads[0], w + 2 * pads[1]]:
                return rec
    return None


def kernel_decisions(mod, kernels) -> dict[str, str]:
    """{kernel name: decision text} for a build's kernels (KernelTime-like: name, binding): what
    LibraryDispatch measured for the call (matched by binding for a torch call, by shapes for a
    call kept in TensorIR and fused), then the tile search's choice."""
    texts = decision_texts(mod)
    recs = decisions_of(mod)
    library = [d for d in recs if d["kind"] == "library_or_tir"]
    tiles = {d["kernel"]: d for d in recs if d["kind"] in ("conv2d_tile", "matmul_tile")}
    out = {}
    for k in kernels:
        found = [texts[b] for b in (k.binding or "").split(", ") if b in texts]
        parts = [found[0] + (f" (+{len(found) - 1} more calls)" if len(found) > 1 else "")] if found else []
        if k.name in tiles:
            rec = _library_record_for_tile(tiles[k.name], library)
            if rec is not None and not parts:
                parts.append(describe_decision(rec))
            parts.append(describe_tile(tiles[k.name]))
        if parts:
            out[k.name] = " · ".join(parts)
    return out
