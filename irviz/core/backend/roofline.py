"""A roofline per kernel: how much work each kernel of a run does, how fast it did it, and how far
that is from what this CPU can do at the kernel's arithmetic intensity.

    roofs = machine_roofs(threads)                       # FMA peak, bandwidth per level (measured)
    table = roofline(built, run_result.kernels, roofs)   # {"peak_gflops", ..., "kernels": [...]}

The model, per kernel (one entry per kernel name of ``RunResult.kernels``; its time is the run's
per-kernel time: every call of it in one run of the function):

* FLOPs, a TensorIR kernel: TVM's own estimate, ``tvm.s_tir.analysis.estimate_tir_flops`` of the
  PrimFunc as built: every floating-point add, multiply, divide, max, ... in the loop nest, times
  the extents of the loops around it (a multiply-add in a reduction counts 2, an elementwise op 1;
  index arithmetic is not counted). Times the calls per run. It is counted on the kernel as built:
  a schedule that pads a loop up to its tile counts the padded iterations too. A stored value
  counts each distinct subexpression once (``flop_count``): an inlined elementwise chain such as
  fast_gelu repeats its inputs' subexpressions in the tree TVM counts, and the compiled code
  computes each of them once.
* FLOPs, a library call (``irviz.torch.matmul`` / ``irviz.torch.conv2d.*``, no TIR to read): from
  the operand shapes of each call site: a matmul 2·|out|·K, a conv2d 2·|out|·(C/groups·KH·KW).
* Bytes: the sizes of the buffers the kernel reads and writes (its parameters: inputs and outputs)
  at their dtype, each counted once per call. This is the traffic a kernel cannot avoid; re-reads
  that miss the cache and buffers the kernel allocates inside (a padded input) are not counted, so
  the memory side is a lower bound and the arithmetic intensity an upper bound. A buffer the
  kernel accesses fewer elements of than it holds (a gather, ``take``, reads the rows its indices
  name, not the whole table) counts the elements accessed: the read and write regions of the
  innermost blocks, times the loops around them (where all of them are static).
* Achieved GFLOP/s = FLOPs / time; GB/s = bytes / time; intensity = FLOPs / byte.
* The roofs are hierarchical: the FMA peak, and one bandwidth per memory level (L1, L2, L3, DRAM;
  ``cache_roofs``), measured at the run's threads. A kernel's working set is its bytes per call;
  it is held against the fastest level that holds it (``level``; the capacity of a private level
  counts once per core the threads use), since that is where its data can come from at best.
* The roof at that intensity = min(peak, level bandwidth × intensity); ``bound`` is "compute" when
  the level's slope lies above the peak there (intensity ≥ the level's ridge), else "memory";
  ``pct_of_roof`` = 100 × achieved / roof. A kernel without FLOPs (a copy, a transpose) is
  memory-bound by definition: its % of roof is its GB/s against the level's bandwidth.
* A kernel timed above its roof (over 100%) is not shown as if it beat it: ``above_roof`` is True
  and ``above_roof_reason`` says which roof it passed and that its time or its byte count is off.
  Where the run marks a kernel's time unreliable (``reliable``/``reason`` on the kernel rows), the
  entry carries it (``reliable``, ``timing_reason``).
* All kernels together: their FLOPs over their time, against the sum of each kernel's shortest
  time at its own roof (``total.roof_ms``, ``total.pct_of_roof``).
* A kernel whose shapes are symbolic, or whose FLOPs TVM cannot estimate, gets None figures.
"""
from __future__ import annotations

import math

import tvm
from tvm import relax, tirx
from tvm.s_tir import SBlockRealize

from irviz.core.backend.cache_roofs import cache_bandwidths, hierarchy
from irviz.core.backend.flop_count import tir_flops
from irviz.core.backend.machine_peak import compute_peak, last_level_cache, memory_bandwidth
from irviz.core.backend.run import tvm_threads
from irviz.core.library_names import MATMUL, PREFIX, conv2d_attrs
from irviz.core.tvm_compat import static_shape

__all__ = ["kernel_work", "machine_roofs", "roofline", "roofline_for"]


def machine_roofs(threads: int | None = None) -> dict:
    """The measured FMA peak and the bandwidth of each memory level, fastest first, for `threads`
    threads (each cached per process): {"peak", "bandwidth" (memory's), "levels", "levels_note"}."""
    threads = max(1, int(threads or tvm_threads() or 1))
    dram = memory_bandwidth(threads)
    try:
        caches = cache_bandwidths(threads)
    except Exception as e:  # memory's roof still stands: the kernels are held against it, and told why
        caches = {"levels": [], "dram_sweep": None,
                  "note": f"the cache roofs could not be measured ({type(e).__name__}: {e}), so every kernel "
                          "is held against memory's roof"}
    return {"peak": compute_peak(threads), "bandwidth": dram,
            "levels": hierarchy(caches["levels"], dram, caches["dram_sweep"]), "levels_note": caches["note"]}


# ------------------------------------------------------------------------------------ the work
def _bytes_of(shape, dtype) -> int:
    return math.prod(int(d) for d in shape) * tvm.runtime.DataType(str(dtype)).bits // 8


class _Opaque(Exception):
    """A statement the access count cannot see through."""


def _int(e) -> int:
    if not isinstance(e, tirx.IntImm):
        raise _Opaque(e)
    return int(e.value)


def _accesses(func: tirx.PrimFunc) -> dict | None:
    """{buffer var: elements read or written, over all iterations} from the read and write
    regions of the innermost blocks times the loops around them; None where a region or a loop is
    symbolic or a statement is not one of blocks and loops."""
    counts: dict = {}

    def walk(stmt, times: int, in_block: bool = False) -> bool:  # True when it met a block
        if isinstance(stmt, SBlockRealize):
            block = stmt.block
            inner = walk(block.body, times, True) | (block.init is not None and walk(block.init, times, True))
            if not inner:
                for region in (*block.reads, *block.writes):
                    n = math.prod(_int(r.extent) for r in region.region)
                    counts[region.source] = counts.get(region.source, 0) + n * times
            return True
        if isinstance(stmt, tirx.For):
            step = 1 if getattr(stmt, "step", None) is None else _int(stmt.step)
            return walk(stmt.body, times * -(-_int(stmt.extent) // max(1, step)), in_block)
        if isinstance(stmt, tirx.SeqStmt):
            return any([walk(x, times, in_block) for x in stmt.seq])
        if isinstance(stmt, tirx.IfThenElse):
            return (walk(stmt.then_case, times, in_block)
                    | (stmt.else_case is not None and walk(stmt.else_case, times, in_block)))
        if isinstance(stmt, (tirx.LetStmt, tirx.AttrStmt)):
            return walk(stmt.body, times, in_block)
        if isinstance(stmt, (tirx.AllocBuffer, tirx.DeclBuffer)) or (in_block and isinstance(stmt, tirx.BufferStore)):
            return False  # a store inside a block: the block's regions count it
        raise _Opaque(stmt)

    try:
        walk(func.body, 1)
    except (_Opaque, AttributeError):
        return None
    return counts


def _prim_work(func: tirx.PrimFunc) -> tuple[float, int] | None:
    """(FLOPs, bytes) of one call of a PrimFunc; None when a parameter's shape is symbolic."""
    nbytes = 0
    accesses = _accesses(func)
    for p in func.params:
        ty = p.ty
        if not hasattr(ty, "shape"):  # a scalar parameter (a symbolic size)
            continue
        if not all(isinstance(d, tirx.IntImm) for d in ty.shape):
            return None
        size = _bytes_of(ty.shape, ty.dtype)
        if accesses is not None and p in accesses:
            # a gather (take) reads a few rows of a big table: it touches no more than it accesses
            size = min(size, accesses[p] * tvm.runtime.DataType(str(ty.dtype)).bits // 8)
        nbytes += size
    flops = tir_flops(func)
    if flops is None:  # a construct the estimator rejects: no figure rather than a wrong one
        return None
    return flops, nbytes


def _library_site_work(name: str, operands: list[list[int]], out: list[int], dtype: str) -> float | None:
    if name == MATMUL and operands and operands[0]:
        return 2.0 * math.prod(out) * operands[0][-1]
    attrs = conv2d_attrs(name)
    if attrs and len(operands) >= 2 and len(operands[1]) == 4:
        return 2.0 * math.prod(out) * math.prod(operands[1][1:])
    return None


def _library_work(mod) -> dict[str, list[tuple[float, int]]]:
    """{library function: [(FLOPs, bytes) per call site]} over the module's Relax functions."""
    sites: dict[str, list[tuple[float, int]]] = {}
    dps = tvm.ir.Op.get("relax.call_dps_packed")

    def visit(e):
        if not (isinstance(e, relax.Call) and e.op.same_as(dps) and isinstance(e.args[0], relax.ExternFunc)):
            return
        name = str(e.args[0].global_symbol)
        if not name.startswith(PREFIX):
            return
        args = list(e.args[1].fields) if isinstance(e.args[1], relax.Tuple) else [e.args[1]]
        shapes = [static_shape(a.ty) for a in args]
        out = static_shape(e.ty)
        if out is None or any(s is None for s in shapes):
            return
        flops = _library_site_work(name, shapes, out, e.ty.dtype)
        if flops is None:
            return
        nbytes = sum(_bytes_of(s, a.ty.dtype) for s, a in zip(shapes, args)) + _bytes_of(out, e.ty.dtype)
        sites.setdefault(name, []).append((flops, nbytes))

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return sites


def kernel_work(built, kernels) -> dict[str, tuple[float, int] | None]:
    """{kernel name: (FLOPs, bytes) per run of the function} for a run's kernels (KernelTime-like:
    name, calls); None where the shapes are symbolic or the work is unknown."""
    prims: dict[str, tirx.PrimFunc] = {}
    for m in (built.mod, built.lowered):  # the built module wins: its kernels are the ones timed
        if m is None:
            continue
        for gv, f in m.functions.items():
            if isinstance(f, tirx.PrimFunc):
                prims.setdefault(gv.name_hint, f)
    library: dict[str, list[tuple[float, int]]] = {}
    for m in (built.mod, built.lowered):
        if m is not None and not library:
            library = _library_work(m)
    out: dict[str, tuple[float, int] | None] = {}
    for k in kernels:
        calls = max(1, int(k.calls))
        if k.name in prims:
            w = _prim_work(prims[k.name])
            out[k.name] = None if w is None else (w[0] * calls, w[1] * calls)
        elif library.get(k.name):
            s = library[k.name]
            # every call site once per run; if the run called it more often (a loop), in proportion
            scale = calls / len(s)
            out[k.name] = (sum(f for f, _ in s) * scale, int(sum(b for _, b in s) * scale))
        else:
            out[k.name] = None
    return out


# ------------------------------------------------------------------------------------ the roofs
KNOWN_SHARE_FOR_TOTAL = 0.5  # of the kernel time, for a GFLOP/s of all kernels together


def _finite_round(x, digits=6):
    """`x` to `digits` significant digits (figures span µs kernels to whole models); None if not finite."""
    return None if x is None or not math.isfinite(x) else float(f"{x:.{digits}g}")


def _levels(roofs: dict, bw: float) -> list[dict]:
    """The roofs' memory levels fastest first, memory's last; memory alone where none were measured."""
    levels = [dict(e) for e in roofs.get("levels") or ()]
    if not levels or levels[-1].get("capacity_bytes") is not None:
        levels.append({"level": "DRAM", "gbs": bw, "capacity_bytes": None,
                       "source": roofs["bandwidth"].get("source", "")})
    return levels


def _level_of(levels: list[dict], working_set: float) -> dict:
    """The fastest level that holds `working_set` bytes; memory when none does."""
    for lv in levels:
        if lv.get("capacity_bytes") is not None and working_set <= lv["capacity_bytes"]:
            return lv
    return levels[-1]


def _above_roof_reason(e: dict, lv: dict, peak: float) -> str:
    if e["bound"] == "compute":
        what = (f"the FMA peak measured here ({peak:g} GFLOP/s); the time or the FLOP count is off (TVM's "
                "count takes every float operation for a FLOP, also those that run beside the FMA units)")
    else:
        what = (f"the {lv['level']} roof measured here ({lv['gbs']:g} GB/s for a working set of "
                f"{e['working_set_bytes']:,} bytes per call); the time or the byte count is off")
    reason = f"timed faster than {what}"
    if e.get("reliable") is False:
        reason += f" (its time is not reliable: {e.get('timing_reason') or 'no reason given'})"
    return reason


def _place(e: dict, flops: float, nbytes: float, seconds: float, calls: int, levels, peak: float) -> float:
    """Fill `e`'s figures against the roof of the level its working set (bytes per call) fits in;
    the shortest time that roof allows, in seconds."""
    lv = _level_of(levels, nbytes / calls)
    bw = float(lv["gbs"])
    e.update(flops=flops, bytes=int(nbytes), gflops=flops / seconds / 1e9, gbs=nbytes / seconds / 1e9,
             working_set_bytes=int(nbytes / calls), level=lv["level"], level_gbs=bw,
             ridge_intensity=peak / bw if bw > 0 else None, in_cache=lv["level"] != "DRAM")
    if nbytes <= 0 or bw <= 0:
        return 0.0
    e["intensity"] = flops / nbytes
    e["roof_gflops"] = min(peak, bw * e["intensity"])
    e["bound"] = "compute" if bw * e["intensity"] >= peak else "memory"
    e["pct_of_roof"] = 100.0 * e["gbs"] / bw if flops == 0 else 100.0 * e["gflops"] / e["roof_gflops"]
    e["above_roof"] = e["pct_of_roof"] > 100.0
    if e["above_roof"]:
        e["above_roof_reason"] = _above_roof_reason(e, lv, peak)
    return max(flops / (peak * 1e9), nbytes / (bw * 1e9))


def roofline(built, kernels, roofs: dict, kernels_reliable=None, kernels_reason=None) -> dict:
    """The roofline block `check --json` and the app show: the machine's roofs (the FMA peak and
    one bandwidth per memory level) with their sources, then one entry per kernel (slowest first,
    as `kernels`) against the roof of the level its working set fits in, then the whole run."""
    peak = float(roofs["peak"]["gflops"])
    levels = _levels(roofs, float(roofs["bandwidth"]["gbs"]))
    bw = float(levels[-1]["gbs"])  # memory's roof: the better of the triad and the sweep
    work = kernel_work(built, kernels)
    llc, llc_name = last_level_cache()
    entries = []
    tot_flops = tot_bytes = tot_ms = known_ms = roof_s = 0.0
    for k in kernels:
        w = work.get(k.name)
        e = {"name": k.name, "calls": int(k.calls), "ms": _finite_round(k.ms), "flops": None, "bytes": None,
             "gflops": None, "gbs": None, "intensity": None, "roof_gflops": None, "bound": None,
             "pct_of_roof": None, "in_cache": None, "level": None, "level_gbs": None, "working_set_bytes": None,
             "ridge_intensity": None, "above_roof": False, "above_roof_reason": None}
        if getattr(k, "reliable", None) is not None:  # the run's own judgement of this kernel's time
            e["reliable"], e["timing_reason"] = bool(k.reliable), getattr(k, "reason", None)
        tot_ms += k.ms
        if w is not None and k.ms > 0:
            flops, nbytes = w
            tot_flops += flops
            tot_bytes += nbytes
            known_ms += k.ms
            roof_s += _place(e, flops, nbytes, k.ms / 1e3, max(1, int(k.calls)), levels, peak)
            if len(levels) == 1 and llc is not None:  # no cache roofs: whether it could beat memory's
                e["in_cache"] = e["working_set_bytes"] <= llc
            for key in ("gflops", "gbs", "intensity", "roof_gflops", "pct_of_roof", "ridge_intensity"):
                e[key] = _finite_round(e[key])
        entries.append(e)
    # a figure for "all kernels" that stands on a sliver of their time (the kernels whose work is
    # known, when the big ones are externs or symbolic) would read as the whole's
    known_share = known_ms / tot_ms if tot_ms > 0 else 0.0
    whole = known_ms > 0 and known_share >= KNOWN_SHARE_FOR_TOTAL
    total = {"flops": tot_flops, "bytes": int(tot_bytes), "kernel_ms": _finite_round(tot_ms),
             "known_ms": _finite_round(known_ms), "known_share": _finite_round(known_share),
             "gflops": _finite_round(tot_flops / known_ms / 1e6) if whole else None,
             "pct_of_peak": _finite_round(100.0 * tot_flops / known_ms / 1e6 / peak)
             if whole and peak > 0 else None,
             "unknown_reason": None if whole else
             (f"the work of {sum(1 for e in entries if e['flops'] is None)} kernel(s) is not known "
              f"(symbolic sizes or a library call), {100 * (1 - known_share):.0f}% of the kernel time"),
             "kernels_without_work": sum(1 for e in entries if e["flops"] is None),
             "intensity": _finite_round(tot_flops / tot_bytes) if tot_bytes > 0 else None,
             # each kernel at its own level's roof: the whole run can go no faster than their sum
             "roof_ms": _finite_round(roof_s * 1e3),
             "roof_gflops": _finite_round(tot_flops / roof_s / 1e9) if roof_s > 0 else None,
             "pct_of_roof": _finite_round(100.0 * roof_s * 1e3 / known_ms) if whole and roof_s > 0 else None,
             "roof_source": "each kernel's shortest time at the roof of its own level, summed"}
    total["above_roof"] = bool(total["pct_of_roof"] and total["pct_of_roof"] > 100.0)
    total["above_roof_reason"] = ("faster than its kernels' roofs allow: "
                                  f"{sum(e['above_roof'] for e in entries)} kernel(s) timed above their roof"
                                  if total["above_roof"] else None)
    return {"peak_gflops": peak, "peak_source": roofs["peak"]["source"],
            "bandwidth_gbs": bw, "bandwidth_source": levels[-1].get("source") or roofs["bandwidth"]["source"],
            "ridge_intensity": round(peak / bw, 3) if bw > 0 else None,
            "levels": [{"level": lv["level"], "gbs": float(lv["gbs"]), "capacity_bytes": lv.get("capacity_bytes"),
                        "ridge_intensity": _finite_round(peak / float(lv["gbs"])) if lv["gbs"] else None,
                        "source": lv.get("source", ""), "adjusted": lv.get("adjusted"),
                        "merged_into": lv.get("merged_into")} for lv in levels],
            "levels_note": roofs.get("levels_note"),
            "last_level_cache": {"bytes": llc, "name": llc_name},
            "threads": roofs["peak"].get("threads"), "peak": roofs["peak"], "bandwidth": roofs["bandwidth"],
            "kernels_reliable": kernels_reliable, "kernels_reason": kernels_reason,
            "kernels": entries, "total": total}


def roofline_for(built, result) -> dict | None:
    """The roofline of a run (RunResult), its roofs measured on the run's threads; None when the
    roofs cannot be measured here (a target this process cannot run)."""
    if not getattr(result, "kernels", None):
        return None
    try:
        roofs = machine_roofs(result.threads or None)
    except Exception:  # the figures are extra: a run does not fail over them
        return None
    return roofline(built, result.kernels, roofs, getattr(result, "kernels_reliable", None),
                    getattr(result, "kernels_reason", None))
