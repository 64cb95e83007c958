"""Estimated latency without running the model: each distinct kernel timed alone, times its calls.

A model without weights cannot run, yet its kernels can: each takes tensors of known shapes, and
random ones of those shapes time it as well as the real ones would. So the step is lowered as the
build lowers it, up to CallTIRRewrite (main still calls every kernel through ``R.call_tir`` with
its shapes), its symbolic sizes bound to the example inputs' (or ``--dim``) values, and every
``call_tir`` / ``call_dps_packed`` site of main counted, through the Relax functions main calls.
Each distinct kernel signature (the PrimFunc's structural hash, its argument shapes and dtypes, the
target) is built in a module of its own and timed once (``measuring``), the figure kept in the
decision cache under this CPU's key, so a second estimate of the same kernels measures nothing.

A kernel that would take more than LONG_SECONDS to time (an unscheduled full-size matmul runs
for minutes) is extrapolated instead: its FLOPs at the rate of the largest kernel timed so far
(kernels are timed smallest first), and its row says so.

A kernel whose operands and outputs together exceed MAX_KERNEL_BYTES is not allocated to be timed:
transposing Gemma's 256000 x 3072 LM head takes 3 GB in and 3 GB out, twice what the engine may
hold. It is extrapolated too: by its FLOPs when it computes (at the rate above), else by the bytes
it writes (a gather from an embedding table writes only its rows), at the rate of the largest
kernel of its kind timed so far (transpose3 for transpose7: a transpose moves a byte slower than
an add), or of any such kernel when none of its kind was. With nothing to extrapolate from, it
is timed after all, writing its output over an operand when that keeps it under KERNEL_BYTES.

The estimate is the sum over signatures of calls x ms, plus one call into the VM's main. A
kernel's figure is a whole run of a one-call main, so it holds the VM's dispatch and the output's
allocation, as the model's run has for each call, and the call into main and back, which the run
pays once: that part, measured on this machine (``vm_overhead``), is taken off every figure and
counted once. What main runs besides its kernel calls (views, storage allocations, shape checks
and, with symbolic sizes, shape computations) is counted in VM instructions of main as built, at
the cost of one measured on this machine.

    est = estimate_latency(step.mod, dims={"seq": 128})   # dict, see `estimate_latency`
"""
from __future__ import annotations

import time

import tvm
from tvm import relax
from tvm.s_tir.analysis import estimate_tir_flops

from irviz.core.backend.build import DEFAULT_BUILD_PASSES, default_build_progress, lower_until
from irviz.core.errors import BuildError
from irviz.core.frontend.inputs import bind_sizes, example_dims, symbolic_sizes
from irviz.core.backend.run import tvm_threads
from irviz.core.backend.timing import contention
from irviz.core.tuning import measuring
from irviz.core.tuning.decision_cache import DecisionCache
from irviz.core.tuning.vm_overhead import vm_call_overhead, vm_instructions
from irviz.core.tvm_compat import GenericConst, host_target, structural_hash

__all__ = ["FOLDS", "REWRITE_INDEX", "before_rewrite", "call_sites", "estimate_latency", "weight_only_calls"]

REWRITE_INDEX = DEFAULT_BUILD_PASSES.index("CallTIRRewrite")
# A kernel slower than this is timed fewer than measuring.RUNS times: a naive 8B matmul takes
# seconds a call, and its figure does not need five of them.
BUDGET_SECONDS = 3.0
# A kernel that would take longer than this to time (its FLOPs at the rate of the largest kernel
# timed so far) is not timed but extrapolated at that rate: an unscheduled 128 x 4096 x 128256
# matmul runs for an hour. Kernels of at least RATE_FLOPS give the rate (smaller ones are
# dominated by memory, not arithmetic).
LONG_SECONDS = 20.0
RATE_FLOPS = 1e7
# The most a kernel's operands and outputs may take to be timed (random arrays of their shapes):
# the engine stays within 4 GB on an 8B model.
MAX_KERNEL_BYTES = 1 << 30
GB = float(1 << 30)
# The random operands and the output of one kernel timed alone stay under this, so an estimate of a
# model whose largest weight is 2 GB (Llama-3-8B's LM head) stays within the engine's 4 GB. A kernel
# over it writes its output over an operand (measuring.call_tir_in_place_module); one still over
# it is not timed (not_estimated says why).
KERNEL_BYTES = 2.5 * (1 << 30)
_TIR = ("relax.call_tir",)
_LIBRARY = ("relax.call_dps_packed",)
# Passes that, with the weights bound as constants, compute what depends on them alone at compile time
FOLDS = ("FoldConstant",)


def before_rewrite(mod):
    """`mod` lowered by the default_build passes it lacks up to CallTIRRewrite (a copy; `mod` itself
    when it is there). BuildError when the step is already past it: its kernels are no longer
    called through call_tir with their shapes."""
    if default_build_progress(mod) > REWRITE_INDEX:
        raise BuildError("this step is past CallTIRRewrite: main no longer calls its kernels with "
                         "their shapes, so they cannot be timed alone from it",
                         "estimate an earlier step (the kernels are the same until codegen)")
    return lower_until(mod, "CallTIRRewrite")


def call_sites(mod, func: str = "main") -> tuple[list[tuple], list[str]]:
    """([(kind "tir" | "library", callee name, call)], notes): every kernel call `func` makes, as
    often as it runs: a Relax function main calls twice gives its sites twice.
    A branch of an If is counted as if it ran (its note says so); a recursive call is not
    followed (its note says the count is unknown)."""
    sites: list[tuple] = []
    notes: list[str] = []

    def walk(expr, stack: tuple):
        if isinstance(expr, relax.SeqExpr):
            for block in expr.blocks:
                for b in block.bindings:
                    walk(b.value, stack)
            walk(expr.body, stack)
        elif isinstance(expr, relax.If):
            notes.append(f"{stack[-1]} has an If: the kernels of both branches are counted")
            walk(expr.true_branch, stack)
            walk(expr.false_branch, stack)
        elif isinstance(expr, relax.Call):
            op = expr.op
            if isinstance(op, tvm.ir.Op) and op.name in _TIR + _LIBRARY:
                kind = "tir" if op.name in _TIR else "library"
                name = expr.args[0].name_hint if kind == "tir" else str(expr.args[0].global_symbol)
                sites.append((kind, name, expr))
            elif isinstance(op, tvm.ir.Op) and op.name.startswith("relax.call_"):
                notes.append(f"{op.name} in {stack[-1]}: not estimated")
            elif isinstance(op, tvm.ir.GlobalVar) and isinstance(mod[op], relax.Function):
                if op.name_hint in stack:
                    notes.append(f"{op.name_hint} calls itself: its kernels' call count is unknown "
                                 "(counted once)")
                else:
                    walk(mod[op].body, stack + (op.name_hint,))  # once per call: its sites again

    walk(mod[func].body, (func,))
    return sites, list(dict.fromkeys(notes))


def weight_only_calls(mod, func: str = "main") -> list:
    """The kernel calls of `func` whose every operand comes from its weights alone: the parameters
    after its ``num_input`` user inputs (a model opened without weights) and constants, through
    whatever computes from those only (a weight's transpose, its re-layout). A build with the weights
    bound folds these calls away (FoldConstant) and its run never makes them."""
    f = mod[func]
    num_input = f.attrs.get("num_input") if f.attrs is not None else None
    if num_input is None or not isinstance(f.body, relax.SeqExpr):
        return []
    weights = set(list(f.params)[int(num_input):])
    found = []
    for block in f.body.blocks:
        for b in block.bindings:
            if not isinstance(b, relax.VarBinding):
                continue
            v = b.value
            if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and v.op.name in _TIR + _LIBRARY:
                # operands all weights, or computed from them, or constants, and at least one not a
                # constant: what the model computes from constants alone (a causal mask's cumsum)
                # is the same with or without weights, and FoldConstant was seen to leave it
                args = [a for a in v.args[1].fields if isinstance(a.ty, relax.TensorType)]
                if (any(a in weights for a in args)
                        and all(isinstance(a, GenericConst) or a in weights for a in args)):
                    weights.add(b.var)
                    found.append(v)
            else:
                used = relax.analysis.free_vars(v)
                if used and all(u in weights for u in used):
                    weights.add(b.var)
    return found


def _signature(mod, kind: str, call) -> str:
    """What the timing of a call depends on: the kernel (its structure, not its name), the shapes
    and dtypes it is called with, the target."""
    types = [a.ty for a in call.args[1].fields] + [call.ty_args[0]]
    shapes = " ".join(str(t) for t in types)
    what = f"{structural_hash(mod[call.args[0]]):016x}" if kind == "tir" else str(call.args[0].global_symbol)
    return f"kernel-ms {what} {shapes} {host_target()}"


def _shapes_text(call) -> str:
    out = []
    for a in call.args[1].fields:
        shape = measuring.shape_of(a.ty)
        out.append("x".join(str(d) for d in shape) if shape is not None else "?")
    return ", ".join(out)


def _flops(mod, kind: str, call) -> float:
    if kind != "tir":
        return 0.0
    try:
        return float(estimate_tir_flops(tvm.IRModule({"main": mod[call.args[0]]})))
    except Exception:  # a kernel TVM cannot count is timed, whatever it costs
        return 0.0


def _bytes(call) -> tuple[int, int]:
    """(bytes of the operands, bytes of the output(s)) of a call; a size not static counts 0."""
    out = call.ty_args[0]
    outs = list(out.fields) if isinstance(out, tvm.ir.TupleType) else [out]
    size = lambda ty: measuring.tensor_bytes(ty) or 0
    return sum(size(a.ty) for a in call.args[1].fields), sum(size(t) for t in outs)


def _family(name: str) -> str:
    """The op a kernel's name comes from: transpose7 -> transpose (LegalizeOps numbers repeats)."""
    return name.rstrip("0123456789_") or name


def _too_big(g: dict, flop_rate, byte_rates: dict) -> tuple[float | None, str]:
    """(ms, what it was extrapolated from) for a kernel too big to allocate; ms None when no rate
    fits yet (the why is then the second item). byte_rates: {kind or None: (bytes written, ms)}."""
    size = (g["bytes"] + g["out_bytes"]) / GB
    if g["flops"] >= RATE_FLOPS and flop_rate:
        return g["flops"] * flop_rate[1] / flop_rate[0], "FLOPs"
    byte_rate = byte_rates.get(_family(g["name"])) or byte_rates.get(None)
    if g["flops"] < RATE_FLOPS and byte_rate:
        return g["out_bytes"] * byte_rate[1] / byte_rate[0], "bytes"
    return None, (f"its operands and outputs take {size:.1f} GB, more than a kernel is given to be "
                  f"timed ({MAX_KERNEL_BYTES / GB:.0f} GB) when a smaller kernel like it was timed "
                  "to extrapolate from, and none was")


def _time(mod, kind: str, call) -> tuple[float, bool, bool]:
    """(ms, whether the output was written over an operand to stay under KERNEL_BYTES, whether its
    threads waited for a core even in the block kept)."""
    operands, output = _bytes(call)
    in_place = None
    if operands + output > KERNEL_BYTES:
        in_place = measuring.in_place_operand(call) if kind == "tir" else None
        if in_place is None or operands > KERNEL_BYTES:
            raise BuildError(f"its operands and output take {(operands + output) / (1 << 30):.1f} GB, "
                             f"over the {KERNEL_BYTES / (1 << 30):.1f} GB one kernel may take to time")
    if in_place is not None:
        small = measuring.call_tir_in_place_module(mod, call, in_place, tensors=True)
    elif kind == "tir":
        small = measuring.call_tir_module(mod, call, tensors=True)
    else:
        small = measuring.call_dps_packed_module(call, tensors=True)
    if small is None:
        raise BuildError("its shapes are not static after binding the sizes")
    timings: list = []
    try:
        ms, _ = measuring.build_and_time(*small, budget_seconds=BUDGET_SECONDS, output=False,
                                         release_inputs=True, timings=timings)
    finally:
        # the VM's pooled allocator keeps every output it allocated, for reuse at the same size,
        # so kernels of distinct output sizes would add up in the engine. Only the free blocks
        # go; what a live VM holds stays.
        tvm.get_global_func("vm.builtin.memory_manager.clear")()
    contended = bool(timings) and contention(timings[-1], tvm_threads()) is not None
    return ms, in_place is not None, contended


def _other_instructions(lowered, func: str, vm: dict, calls: int) -> float:
    """VM instructions of `func` once built beyond a main's own and its kernel calls' (each as the
    chain of vm_overhead makes one); 0 when it cannot be lowered that far or nothing was timed."""
    if not vm:
        return 0.0
    try:
        n = vm_instructions(lowered, func)
    except Exception:  # the estimate stands on its kernels; this term is the smaller part
        return 0.0
    return max(0.0, n - vm["base_instrs"] - calls * vm["call_instrs"])


def estimate_latency(mod, dims: dict | None = None, shapes=None, *, func: str = "main",
                     progress=None, dims_source: dict | None = None, fresh: bool = False,
                     fold_weights: bool = False) -> dict:
    """The estimated latency of `func` of `mod` (any step before CallTIRRewrite; see the module doc).

    dims: values for symbolic sizes (--dim); shapes: the example inputs' shapes, for the rest.
    progress(text, fraction): before each kernel that is timed. fresh: time every kernel again
    (the cache's figures are replaced; its other decisions, e.g. LibraryDispatch's, still hold).
    fold_weights: `mod` stands for a model whose weights a build binds and folds (opened without
    them, its pipeline ran FoldConstant): the calls on weights alone (weight_only_calls) are left
    out of the total and listed in "folded" [{name, kind, calls, shapes}], not timed.
    Returns {"estimated_ms", "kernels": [{name, kind, calls, ms, total_ms, share, shapes, cached,
    extrapolated, extrapolated_from ("FLOPs" | "bytes", where extrapolated),
    in_place, contended, flops}] (largest total first), "not_estimated": [{name,
    kind, calls, why}], "folded", "notes", "dims", "dims_source", "measured", "cached",
    "extrapolated", "seconds", "target", "complete", "vm_entry_ms", "vm_call_ms",
    "vm_other_instructions", "vm_other_ms", "contended": names of kernels timed while their
    threads waited for a core (their figures are high; `fresh` times them again)}. A row's ms is
    its figure less vm_entry_ms, the call into main every one-call figure holds, which the total
    counts once, with the VM instructions main runs besides its kernel calls (vm_other_ms)."""
    t0 = time.perf_counter()
    dims, source = example_dims(mod, shapes, dims, func)
    if dims_source:
        source.update({k: v for k, v in dims_source.items() if k in dims})
    used = set(symbolic_sizes(mod, func))
    dims = {k: v for k, v in dims.items() if k in used}
    unbound = before_rewrite(mod)
    lowered = bind_sizes(unbound, dims, func)
    sites, notes = call_sites(lowered, func)
    folded: dict[str, dict] = {}
    if fold_weights:  # what a build with the weights computes at compile time, not at each run
        once = weight_only_calls(lowered, func)
        for kind, name, call in [s for s in sites if any(s[2].same_as(c) for c in once)]:
            f = folded.setdefault(name, {"name": name, "kind": kind, "calls": 0, "shapes": _shapes_text(call)})
            f["calls"] += 1
        sites = [s for s in sites if not any(s[2].same_as(c) for c in once)]
    groups: dict[str, dict] = {}
    for kind, name, call in sites:
        key = _signature(lowered, kind, call)
        g = groups.setdefault(key, {"name": name, "kind": kind, "calls": 0, "call": call})
        g["calls"] += 1
    cache = DecisionCache.shared()
    names_seen: dict[str, int] = {}
    rows, missing, measured, cached = [], [], 0, 0
    for g in groups.values():
        g["flops"] = _flops(lowered, g["kind"], g["call"])
        g["bytes"], g["out_bytes"] = _bytes(g["call"])
    # each figure holds the call into main once; the run pays it once (vm_overhead)
    vm = vm_call_overhead(fresh) if groups else {}
    entry_ms, call_ms = vm.get("entry_ms", 0.0), vm.get("call_ms", 0.0)
    rate = None  # (flops, ms) of the largest kernel timed so far
    # (output bytes, ms) of the largest kernel under RATE_FLOPS timed so far, of each kind (None: any)
    byte_rates: dict[str | None, tuple[int, float]] = {}
    extrapolated = 0
    # small first, those too big to allocate last: the rates come from the largest kernels timed
    order = sorted(groups.items(), key=lambda kv: (kv[1]["bytes"] + kv[1]["out_bytes"] > MAX_KERNEL_BYTES,
                                                   kv[1]["flops"], kv[1]["bytes"] + kv[1]["out_bytes"],
                                                   kv[1]["name"]))
    for k, (key, g) in enumerate(order):
        label = g["name"]
        names_seen[label] = names_seen.get(label, 0) + 1
        if names_seen[label] > 1:  # one kernel called at two shapes: a row each
            label = f"{label} #{names_seen[label]}"
        rec = None if fresh else cache.get(key)
        guess = g["flops"] * rate[1] / rate[0] if rate and g["flops"] > 0 else None
        basis = "FLOPs"
        too_big = g["bytes"] + g["out_bytes"] > MAX_KERNEL_BYTES
        if rec is None and too_big:
            # with no rate to extrapolate from, it is timed after all (in place if need be)
            guess, basis = _too_big(g, rate, byte_rates)
        if rec is None and guess is not None and (too_big or guess > LONG_SECONDS * 1e3):
            extrapolated += 1
            rows.append({"name": label, "kind": g["kind"], "calls": g["calls"], "ms": guess,
                         "total_ms": guess * g["calls"], "shapes": _shapes_text(g["call"]),
                         "cached": False, "extrapolated": True, "extrapolated_from": basis, "in_place": False,
                         "contended": False,
                         "flops": g["flops"]})
            continue
        if rec is None:
            if progress is not None:
                progress(f"Timing kernel {k + 1}/{len(groups)}: {label}", k / max(1, len(groups)))
            try:
                ms, in_place, contended = _time(lowered, g["kind"], g["call"])
            except Exception as exc:  # a kernel that does not build alone is named, not fatal
                why = measuring.first_line(exc)
                missing.append({"name": label, "kind": g["kind"], "calls": g["calls"],
                                "why": f"{basis}; timed alone: {why}" if too_big else why})
                continue
            cache.put(key, {"kind": "kernel_ms", "kernel": g["name"], "ms": ms, "in_place": in_place,
                            "contended": contended})
            measured += 1
            hit = False
        else:
            ms, hit, in_place, contended = float(rec["ms"]), True, bool(rec.get("in_place")), bool(rec.get("contended"))
            cached += 1
        ms = max(0.0, ms - entry_ms)
        if g["flops"] >= RATE_FLOPS and ms > 0 and (rate is None or g["flops"] >= rate[0]):
            rate = (g["flops"], ms)
        if g["flops"] < RATE_FLOPS and ms > 0 and g["out_bytes"] > 0:
            for fam in (None, _family(g["name"])):
                if fam not in byte_rates or g["out_bytes"] >= byte_rates[fam][0]:
                    byte_rates[fam] = (g["out_bytes"], ms)
        rows.append({"name": label, "kind": g["kind"], "calls": g["calls"], "ms": ms,
                     "total_ms": ms * g["calls"], "shapes": _shapes_text(g["call"]), "cached": hit,
                     "extrapolated": False, "in_place": in_place, "contended": contended,
                     "flops": g["flops"]})
    # what main runs besides its kernel calls and their allocations: views, storage, shape work
    # counted on main as it runs: with its symbolic sizes, and the shape work they take
    other = _other_instructions(unbound, func, vm, len(sites) + sum(f["calls"] for f in folded.values()))
    total = sum(r["total_ms"] for r in rows) + entry_ms + other * vm.get("instr_ms", 0.0)
    for r in rows:
        r["share"] = r["total_ms"] / total if total > 0 else 0.0
    rows.sort(key=lambda r: -r["total_ms"])
    if progress is not None:
        progress("Estimate: done", 1.0)
    return {"estimated_ms": total, "kernels": rows, "not_estimated": missing, "notes": notes,
            "vm_entry_ms": entry_ms, "vm_call_ms": call_ms, "vm_other_instructions": other,
            "vm_other_ms": other * vm.get("instr_ms", 0.0),
            "contended": [r["name"] for r in rows if r["contended"]], "folded": list(folded.values()),
            "dims": dims, "dims_source": {k: source.get(k, "--dim") for k in dims},
            "measured": measured, "cached": cached, "extrapolated": extrapolated,
            "complete": not missing,
            "seconds": time.perf_counter() - t0, "target": str(host_target()),
            "func": func, "sites": len(sites)}

