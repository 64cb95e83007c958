"""Decisions measured on this machine, not constants from another one.

* :func:`library_or_tir` — for one conv2d / matmul call: build the call alone both ways (a torch
  library call through ``call_dps_packed``, and TensorIR through the rest of the CPU pipeline), time
  each on random inputs of the real shapes, keep the faster. LibraryDispatch(measure=True) uses it.
* :func:`tune_conv2d` — the CPUTuneConv2d pass: for each conv2d kernel, a few tiles (vector factor ×
  register tile, at most ``MAX_CANDIDATES``) through CPUTileConv2d, each built with its weight
  prepacked as in the real build and timed; the fastest is written into the kernel
  (``cpu_schedules.TILE_ATTR``) for CPUTileConv2d, with every candidate's time in its notes.

Each kernel is built in a module of its own: ``main`` calls it once, constant arguments (weights)
stay constants so CPUPrepackWeights folds their re-layout at compile time, as it does in the model.
Figures are the minimum of a few runs (on a busy machine the minimum is the least disturbed).
A candidate that fails to schedule, build or run, or whose numbers differ from the reference
candidate's, is dropped with a note, never chosen. Results are cached per machine
(``decision_cache``).
"""
from __future__ import annotations

import json
import time

import numpy as np
import tvm
from tvm import relax, tirx

from irviz.core.backend.timing import add_tune_seconds, time_alone, tune_seconds
from irviz.core.passes import cpu_schedules as schedules
from irviz.core.passes.decision_cache import DecisionCache
from irviz.core.tvm_compat import GenericConst

MAX_CANDIDATES = 8
RUNS = 5
DECISIONS_ATTR = "irviz.decisions"  # module attr: JSON records of LibraryDispatch's measured choices

# the steps a call kept in TensorIR goes through in fast-cpu / tir-cpu
TIR_STEPS = ("LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR",
             "CPUTuneConv2d", "CPUTileConv2d", "CPUInlineElementwise", "CPUTileReductions",
             "CPUParallelVectorize", "CPUPrepackWeights")


# ------------------------------------------------------------------------------------ workloads
def _shape(ty) -> list[int] | None:
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        return None
    dims = ty.shape.values
    return [int(d) for d in dims] if all(isinstance(d, tirx.IntImm) for d in dims) else None


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
    shapes = "*".join("x".join(map(str, _shape(a.ty) or ["?"])) + ("c" if isinstance(a, GenericConst) else "")
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


def _random(shape, dtype, seed):
    dtype = str(dtype)
    return (np.random.default_rng(seed).standard_normal(shape) * 0.1).astype(dtype)


def _single_call_module(call) -> tuple[tvm.IRModule, list[np.ndarray]]:
    """main(params...) = the call, with constant args as random constants of the same shape;
    returns the module and random inputs for its params."""
    bb = relax.BlockBuilder()
    params, args, inputs = [], [], []
    for i, a in enumerate(call.args):
        shape, dtype = _shape(a.ty), a.ty.dtype
        if isinstance(a, GenericConst):
            args.append(relax.const(_random(shape, dtype, 100 + i)))
        else:
            v = relax.Var(f"a{i}", relax.TensorType(shape, dtype))
            params.append(v)
            args.append(v)
            inputs.append(_random(shape, dtype, i))
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit(relax.Call(call.op, args, call.attrs, call.ty_args))
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    return bb.get(), inputs


def _build_and_time(mod, inputs) -> tuple[float, np.ndarray]:
    """(min ms over RUNS, output) of mod's main on `inputs`."""
    from irviz.core.backend.build import build

    built = build(mod)
    vm = relax.VirtualMachine(built.executable, tvm.cpu())
    fn = vm["main"]
    args = [tvm.runtime.tensor(x) for x in inputs]
    out = fn(*args).numpy()
    t = time_alone(lambda: fn(*args), RUNS, warmup=1, settle=0)
    return t.min_ms, out


def _apply(mod, names, **params_by_pass):
    from irviz.core.passes.registry import PassInvocation, apply_pass

    for name in names:
        mod = apply_pass(PassInvocation(name, params_by_pass.get(name, {})), mod)
    return mod


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    scale = max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-3, atol=1e-3 * scale))


def _first_line(exc: BaseException) -> str:
    from irviz.core.errors import tvm_error_text

    text = (getattr(exc, "message", None) or tvm_error_text(exc)).strip()
    return (text.splitlines() or [type(exc).__name__])[0][:200]


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
    mod, inputs = _single_call_module(call)
    torch_out = tir_out = None
    try:
        rec["torch_ms"], torch_out = _build_and_time(library_module(mod), inputs)
    except Exception as exc:  # noqa: BLE001 - a library call that raises is never chosen
        rec["notes"].append(f"torch call failed: {_first_line(exc)}")
    try:
        rec["tir_ms"], tir_out = _build_and_time(_apply(mod, TIR_STEPS), inputs)
    except Exception as exc:  # noqa: BLE001
        rec["notes"].append(f"TensorIR failed: {_first_line(exc)}")
    if tir_out is not None and torch_out is not None and not _close(tir_out, torch_out):
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
                rec[side], outs[side] = _build_and_time(_apply(mod, TIR_STEPS), inputs)
            except Exception as exc:  # noqa: BLE001
                rec["notes"].append(f"{'mixture' if side == 'torch_ms' else 'all TensorIR'} failed: {_first_line(exc)}")
        if len(outs) == 2 and not _close(outs["tir_ms"], outs["torch_ms"]):
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
    """The measured decisions a module carries: LibraryDispatch's per call, CPUTuneConv2d's per kernel."""
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
                out.append({"kind": "conv2d_tile", "kernel": gv.name_hint, **json.loads(str(func.attrs[TUNE_NOTE_ATTR]))})
            except ValueError:
                continue
    return out


def describe_tile(rec: dict) -> str:
    """"tile 8×7 of 8 measured: 1.76 ms (rule's 8×14: 2.42 ms)"."""
    ok = [c for c in rec.get("candidates", []) if "ms" in c]
    if not rec.get("choice") or not ok:
        return "tile search: no candidate built" + (f" ({rec['candidates'][0].get('error')})"
                                                    if rec.get("candidates") else "")
    best = min(ok, key=lambda c: c["ms"])
    first = rec["candidates"][0]
    text = f"tile {best['vec']}×{best['reg']}, fastest of {len(rec['candidates'])} measured: {best['ms']:.3g} ms"
    if first is not best and "ms" in first:
        text += f" (the rule's {first['vec']}×{first['reg']}: {first['ms']:.3g} ms)"
    return text


def kernel_decisions(mod, kernels) -> dict[str, str]:
    """{kernel name: decision text} for a build's kernels (KernelTime-like: name, binding)."""
    texts = decision_texts(mod)
    tiles = {d["kernel"]: d for d in decisions_of(mod) if d["kind"] == "conv2d_tile"}
    out = {}
    for k in kernels:
        if k.name in tiles:
            out[k.name] = describe_tile(tiles[k.name])
            continue
        found = [texts[b] for b in (k.binding or "").split(", ") if b in texts]
        if found:
            out[k.name] = found[0] + (f" (+{len(found) - 1} more calls)" if len(found) > 1 else "")
    return out


# ------------------------------------------------------------------------------ conv2d tiles
TUNE_NOTE_ATTR = "irviz.tile_search"  # JSON: candidates with their times, the choice


def _conv_extents(func) -> tuple[int, int] | None:
    """(output channels, output width) of the kernel's conv2d, if CPUTileConv2d would block it."""
    sch = tvm.s_tir.Schedule(func)
    try:
        convs = schedules._conv_blocks(sch)
    except Exception:  # noqa: BLE001 - no root block (an extern kernel such as sort): no conv2d to tile
        return None
    if not convs:
        return None
    loops = sch.get_loops(convs[0][0])
    if len(loops) < 6:
        return None
    F, W = schedules._const(sch.get(loops[-6]).extent), schedules._const(sch.get(loops[-4]).extent)
    return (F, W) if F and W else None


def _conv_signature(func) -> str:
    """The conv2d itself, whatever epilogue was fused after it: the shapes its block reads and
    writes (input, weight, output). A tile measured for a bare conv2d (LibraryDispatch's TensorIR
    side) is the tile for the same conv2d fused with its bias and relu."""
    sch = tvm.s_tir.Schedule(func)
    block = sch.get(schedules._conv_blocks(sch)[0][0])
    shapes = [[int(d) for d in reg.source.shape] for reg in (*block.reads, *block.writes)]
    return " ".join("x".join(map(str, sh)) for sh in shapes) + f" {block.writes[0].source.dtype}"


def candidates(F: int, W: int, lanes: int) -> list[dict]:
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


def _kernel_module(mod, gv) -> tuple[tvm.IRModule, list[np.ndarray]] | None:
    """main(...) = call_tir(gv, args) for the first call of `gv` in `mod`'s main, constants kept as
    random constants; None when main does not call it with static shapes."""
    found = []
    call_tir = tvm.ir.Op.get("relax.call_tir")

    def visit(e):
        if not found and isinstance(e, relax.Call) and e.op.same_as(call_tir) and e.args[0].same_as(gv):
            found.append(e)

    relax.analysis.post_order_visit(mod["main"], visit)
    if not found:
        return None
    call = found[0]
    bb = relax.BlockBuilder()
    params, args, inputs = [], [], []
    for i, a in enumerate(call.args[1].fields):
        shape = _shape(a.ty)
        if shape is None:
            return None
        if isinstance(a, GenericConst):
            args.append(relax.const(_random(shape, a.ty.dtype, 100 + i)))
        else:
            v = relax.Var(f"a{i}", relax.TensorType(shape, a.ty.dtype))
            params.append(v)
            args.append(v)
            inputs.append(_random(shape, a.ty.dtype, i))
    kernel = mod[gv]
    with bb.function("main", params):
        with bb.dataflow():
            k = bb.add_func(kernel, gv.name_hint)
            out = bb.emit(relax.call_tir(k, args, call.ty_args[0]))
            res = bb.emit_output(out)
        bb.emit_func_output(res)
    return bb.get(), inputs


def _tile_kernel(mod, gv, tile, lanes):
    out = schedules.with_functions(mod, {gv: mod[gv].with_attr(schedules.TILE_ATTR, tvm.runtime.convert(tile))})
    return _apply(out, ("CPUTileConv2d", "CPUInlineElementwise", "CPUTileReductions", "CPUParallelVectorize",
                        "CPUPrepackWeights"), CPUTileConv2d={"lanes": lanes})


def search_tile(mod, gv, lanes: int) -> dict | None:
    """Time the candidate tiles of kernel `gv`; the record (cached per machine and kernel)."""
    ext = _conv_extents(mod[gv])
    single = _kernel_module(mod, gv) if ext else None
    if single is None:
        return None
    small, inputs = single
    small_gv = small.get_global_var(gv.name_hint)
    key = f"conv2d-tile {_conv_signature(mod[gv])} lanes{lanes}"
    cache = DecisionCache.shared()
    hit = cache.get(key)
    if hit is not None and isinstance(hit.get("choice"), dict):
        return {**hit, "cached": True}
    t0 = time.perf_counter()
    tried, reference = [], None
    for tile in candidates(*ext, lanes):
        entry = dict(tile)
        try:
            ms, out = _build_and_time(_tile_kernel(small, small_gv, tile, lanes), inputs)
        except Exception as exc:  # noqa: BLE001 - a candidate that fails is dropped, with why
            entry["error"] = _first_line(exc)
        else:
            if reference is None:
                reference = out
            if not _close(out, reference):
                entry["error"] = "numbers differ from the first candidate's"
            else:
                entry["ms"] = round(ms, 4)
        tried.append(entry)
    ok = [c for c in tried if "ms" in c]
    seconds = time.perf_counter() - t0
    add_tune_seconds(seconds)
    if not ok:
        return {"workload": key, "candidates": tried, "choice": None, "seconds": round(seconds, 3), "cached": False}
    best = min(ok, key=lambda c: c["ms"])
    rec = {"workload": key, "candidates": tried, "choice": {"vec": best["vec"], "reg": best["reg"]},
           "seconds": round(seconds, 3)}
    cache.put(key, rec)
    return {**rec, "cached": False}


def tune_conv2d(lanes: int = 0):
    """Module pass CPUTuneConv2d: measure tiles for each conv2d kernel; record the best on it."""
    n = schedules.target_lanes(lanes)

    @tvm.ir.transform.module_pass(opt_level=0, name="CPUTuneConv2d")
    def _pass(mod, ctx):
        if "main" not in [g.name_hint for g in mod.get_global_vars()]:
            return mod
        updates = {}
        for gv, func in mod.functions.items():
            if not isinstance(func, tirx.PrimFunc) or schedules.conv_tile_of(func) is not None:
                continue
            rec = search_tile(mod, gv, n)
            if rec is None:
                continue
            new = func.with_attr(TUNE_NOTE_ATTR, json.dumps({k: v for k, v in rec.items() if k != "cached"},
                                                            sort_keys=True))
            if rec["choice"] is not None:
                new = new.with_attr(schedules.TILE_ATTR, tvm.runtime.convert(rec["choice"]))
            updates[gv] = new
        return schedules.with_functions(mod, updates)

    return _pass
