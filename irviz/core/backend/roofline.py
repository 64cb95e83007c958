"""A roofline per kernel: how much work each kernel of a run does, how fast it did it, and how far
that is from what this CPU can do at the kernel's arithmetic intensity.

    roofs = machine_roofs(threads)                       # measured peak and bandwidth (machine_peak)
    table = roofline(built, run_result.kernels, roofs)   # {"peak_gflops", ..., "kernels": [...]}

The model, per kernel (one entry per kernel name of ``RunResult.kernels``; its time is the run's
per-kernel time: every call of it in one run of the function):

* FLOPs, a TensorIR kernel: TVM's own estimate, ``tvm.s_tir.analysis.estimate_tir_flops`` of the
  PrimFunc as built: every floating-point add, multiply, divide, max, ... in the loop nest, times
  the extents of the loops around it (a multiply-add in a reduction counts 2, an elementwise op 1;
  index arithmetic is not counted). Times the calls per run. It is counted on the kernel as built:
  a schedule that pads a loop up to its tile counts the padded iterations too.
* FLOPs, a library call (``irviz.torch.matmul`` / ``irviz.torch.conv2d.*``, no TIR to read): from
  the operand shapes of each call site: a matmul 2·|out|·K, a conv2d 2·|out|·(C/groups·KH·KW).
* Bytes: the sizes of the buffers the kernel reads and writes (its parameters: inputs and outputs)
  at their dtype, each counted once per call. This is the traffic a kernel cannot avoid; re-reads
  that miss the cache and buffers the kernel allocates inside (a padded input) are not counted, so
  the memory side is a lower bound and the arithmetic intensity an upper bound.
* Achieved GFLOP/s = FLOPs / time; GB/s = bytes / time; intensity = FLOPs / byte.
* The roof at that intensity = min(peak, bandwidth × intensity); ``bound`` is "compute" when the
  bandwidth slope lies above the peak there (intensity ≥ peak / bandwidth, the ridge), else
  "memory"; ``pct_of_roof`` = 100 × achieved / roof. A kernel without FLOPs (a copy, a transpose)
  is memory-bound by definition: its % of roof is its GB/s against the bandwidth.
* The bandwidth is memory's. A kernel whose buffers (per call) fit in the last-level cache can read
  them from the cache, faster than memory: ``in_cache`` is True for it, and its % of roof can pass
  100 (its real roof is the cache's bandwidth, which is not measured here).
* A kernel whose shapes are symbolic, or whose FLOPs TVM cannot estimate, gets None figures.
"""
from __future__ import annotations

import math

import tvm
from tvm import relax, tirx
from tvm.s_tir.analysis import estimate_tir_flops

from irviz.core.backend.machine_peak import compute_peak, last_level_cache, memory_bandwidth
from irviz.core.library_names import MATMUL, PREFIX, conv2d_attrs
from irviz.core.tvm_compat import static_shape

__all__ = ["kernel_work", "machine_roofs", "roofline", "roofline_for"]


def machine_roofs(threads: int | None = None) -> dict:
    """The measured peak and bandwidth for `threads` threads (cached per process)."""
    return {"peak": compute_peak(threads), "bandwidth": memory_bandwidth(threads)}


# ------------------------------------------------------------------------------------ the work
def _bytes_of(shape, dtype) -> int:
    return math.prod(int(d) for d in shape) * tvm.runtime.DataType(str(dtype)).bits // 8


def _prim_work(func: tirx.PrimFunc) -> tuple[float, int] | None:
    """(FLOPs, bytes) of one call of a PrimFunc; None when a parameter's shape is symbolic."""
    nbytes = 0
    for p in func.params:
        ty = p.ty
        if not hasattr(ty, "shape"):  # a scalar parameter (a symbolic size)
            continue
        if not all(isinstance(d, tirx.IntImm) for d in ty.shape):
            return None
        nbytes += _bytes_of(ty.shape, ty.dtype)
    try:
        flops = float(estimate_tir_flops(tvm.IRModule({"main": func})))
    except Exception:  # a construct the estimator rejects: no figure rather than a wrong one
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
def _finite_round(x, digits=6):
    """`x` to `digits` significant digits (figures span µs kernels to whole models); None if not finite."""
    return None if x is None or not math.isfinite(x) else float(f"{x:.{digits}g}")


def roofline(built, kernels, roofs: dict) -> dict:
    """The roofline block `check --json` and the app show: the machine's roofs with their sources,
    then one entry per kernel (slowest first, as `kernels`), then the whole run's totals."""
    peak = float(roofs["peak"]["gflops"])
    bw = float(roofs["bandwidth"]["gbs"])
    work = kernel_work(built, kernels)
    llc, llc_name = last_level_cache()
    entries = []
    tot_flops = tot_bytes = tot_ms = 0.0
    for k in kernels:
        w = work.get(k.name)
        e = {"name": k.name, "calls": int(k.calls), "ms": _finite_round(k.ms), "flops": None, "bytes": None,
             "gflops": None, "gbs": None, "intensity": None, "roof_gflops": None, "bound": None,
             "pct_of_roof": None, "in_cache": None}
        tot_ms += k.ms
        if w is not None and k.ms > 0:
            flops, nbytes = w
            tot_flops += flops
            tot_bytes += nbytes
            seconds = k.ms / 1e3
            e.update(flops=flops, bytes=int(nbytes), gflops=flops / seconds / 1e9,
                     gbs=nbytes / seconds / 1e9,
                     in_cache=None if llc is None else nbytes / max(1, int(k.calls)) <= llc)
            if nbytes > 0:
                e["intensity"] = flops / nbytes
                e["roof_gflops"] = min(peak, bw * e["intensity"])
                e["bound"] = "compute" if bw * e["intensity"] >= peak else "memory"
                e["pct_of_roof"] = (100.0 * e["gbs"] / bw if flops == 0
                                    else 100.0 * e["gflops"] / e["roof_gflops"])
            for key in ("gflops", "gbs", "intensity", "roof_gflops", "pct_of_roof"):
                e[key] = _finite_round(e[key])
        entries.append(e)
    known_ms = sum(k.ms for k in kernels if work.get(k.name) is not None)
    return {"peak_gflops": peak, "peak_source": roofs["peak"]["source"],
            "bandwidth_gbs": bw, "bandwidth_source": roofs["bandwidth"]["source"],
            "ridge_intensity": round(peak / bw, 3) if bw > 0 else None,
            "last_level_cache": {"bytes": llc, "name": llc_name},
            "threads": roofs["peak"].get("threads"), "peak": roofs["peak"], "bandwidth": roofs["bandwidth"],
            "kernels": entries,
            "total": {"flops": tot_flops, "bytes": int(tot_bytes), "kernel_ms": _finite_round(tot_ms),
                      "gflops": _finite_round(tot_flops / known_ms / 1e6) if known_ms > 0 else None,
                      "pct_of_peak": _finite_round(100.0 * tot_flops / known_ms / 1e6 / peak)
                      if known_ms > 0 and peak > 0 else None,
                      "kernels_without_work": sum(1 for e in entries if e["flops"] is None)}}


def roofline_for(built, result) -> dict | None:
    """The roofline of a run (RunResult), its roofs measured on the run's threads; None when the
    roofs cannot be measured here (a target this process cannot run)."""
    if not getattr(result, "kernels", None):
        return None
    try:
        roofs = machine_roofs(result.threads or None)
    except Exception:  # the figures are extra: a run does not fail over them
        return None
    return roofline(built, result.kernels, roofs)
