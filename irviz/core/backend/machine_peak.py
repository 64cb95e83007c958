"""The two roofs of a roofline, measured on the machine the kernels run on, once per process.

    peak = compute_peak(threads)     # {"gflops", "source", "formula": {...}}
    bw = memory_bandwidth(threads)   # {"gbs", "source"}

Compute peak: a kernel compiled with TVM for this CPU in which every thread keeps 12 independent
float32 vector accumulators (one register each, ``lanes`` wide) and updates them with
``acc = acc * a + b`` in a loop; LLVM contracts the update into one FMA instruction, and 12 chains
hide the FMA latency on the x86 and Arm cores we know of (4 cycles × 2 units needs 8). FLOPs per
run = threads × iterations × 12 × lanes × 2. The peak is one core's rate (the best of 15 short
runs) times the threads (at most one per core); all threads together are measured too and reported
next to it (on a shared machine they read low whenever another process runs). It is measured
rather than computed because the clock the cores really run at is not readable in a VM:
``/proc/cpuinfo`` gives the nominal clock, and on this kind of machine (AMD EPYC, KVM) the cores
boost well above it. The stated formula, vector lanes (``target.cpu_info``) × FMA units (assumed per
ISA, below) × 2 × threads × nominal clock, is reported next to the measurement, with the clock
the measurement implies.

Memory bandwidth: the STREAM triad ``a[i] = b[i] + s * c[i]`` over three float32 arrays of
64 MiB each (together 6× a 32 MiB L3, so they stream from memory), compiled with TVM, vectorized,
parallel over the same threads and on one thread (the better of the two is used: the threads can
always move what one moves); 12 bytes per element (two reads, one write; write-allocate traffic is
not counted, as STREAM does not count it); the best of 8 runs each.

Both are cached per thread count for the process (2-9 s together on a busy 2-core machine,
most of it compiling the two kernels and filling the arrays).
"""
from __future__ import annotations

import functools
import glob
import time
from collections.abc import Callable

import numpy as np
import tvm
from tvm.script import tirx as T

from irviz.core.backend.run import tvm_threads
from irviz.core.backend.timing import load_average
from irviz.core.target import cpu_info
from irviz.core.tvm_compat import host_target

CHAINS = 12  # independent accumulators per thread (registers: 12 of the 16/32 vector registers)
# FMA units per core assumed by ISA for the formula (measured figure is the one used): two 512-bit
# units on Skylake-SP/Ice Lake server and Zen 4/5 cores, two 256-bit on Haswell..Zen 3, two NEON
FMA_UNITS = {"AVX-512": 2, "AVX2": 2, "AVX": 1, "NEON": 2, "SVE": 2, "SSE2": 1, "scalar": 1}
TRIAD_ELEMENTS = 16 * 1024 * 1024  # float32: 64 MiB per array
BW_RUNS = 8
RUNS = 15  # short runs (under a millisecond each): more of them find a quiet moment on a shared machine


def nominal_clock_mhz() -> tuple[float | None, str]:
    """(MHz, where it was read): lscpu's "CPU max MHz" if the kernel exposes cpufreq, else the
    first "cpu MHz" of /proc/cpuinfo (the nominal clock in a VM)."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", encoding="utf-8") as fh:
            return int(fh.read().strip()) / 1000.0, "cpufreq cpuinfo_max_freq (lscpu's CPU max MHz)"
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("cpu mhz"):
                    return float(line.split(":", 1)[1]), "/proc/cpuinfo \"cpu MHz\""
    except (OSError, ValueError):
        pass
    return None, "no clock readable (/proc/cpuinfo has no \"cpu MHz\")"


def last_level_cache() -> tuple[int | None, str]:
    """(bytes, name) of the largest cache of cpu0, from sysfs; (None, why) where it is not exposed."""
    best: tuple[int, int] | None = None
    for d in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            with open(f"{d}/level", encoding="utf-8") as fh:
                level = int(fh.read())
            with open(f"{d}/size", encoding="utf-8") as fh:
                text = fh.read().strip().upper()
        except (OSError, ValueError):
            continue
        mult = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(text[-1:], 1)
        size = int(text.rstrip("KMG")) * mult
        if best is None or (level, size) > best:
            best = (level, size)
    if best is None:
        return None, "no cache sizes in /sys/devices/system/cpu/cpu0/cache"
    return best[1], f"L{best[0]}"


def _best_seconds(f, args, runs: int) -> float:
    f(*args)  # warm-up: thread pool start, page faults
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        f(*args)
        best = min(best, time.perf_counter() - t)
    return best


def _fma_kernel(threads: int, iterations: int, lanes: int):
    P, N, C, L = threads, iterations, CHAINS, lanes

    # one thread: a serial loop, as a parallel loop of one task still waits for every worker of
    # TVM's pool to check in (on a busy machine one of them is often off its core)
    outer = T.parallel if P > 1 else T.serial

    @T.prim_func
    def fma_peak(x: T.Buffer((P, C, L), "float32"), y: T.Buffer((P, C, L), "float32")):
        for p in outer(P):
            acc = T.alloc_buffer((C, L), "float32", scope="local")
            for c in T.unroll(C):
                for l in T.vectorized(L):
                    acc[c, l] = x[p, c, l]
            for _k in range(N):
                for c in T.unroll(C):
                    for l in T.vectorized(L):
                        acc[c, l] = acc[c, l] * T.float32(0.99999) + T.float32(1e-6)
            for c in T.unroll(C):
                for l in T.vectorized(L):
                    y[p, c, l] = acc[c, l]

    return fma_peak


def _triad_kernel(n: int, threads: int, lanes: int):
    chunk = -(-n // threads)
    chunk = -(-chunk // lanes) * lanes
    steps = chunk // lanes

    @T.prim_func
    def triad(a: T.Buffer((n,), "float32"), b: T.Buffer((n,), "float32"), c: T.Buffer((n,), "float32")):
        for p in T.parallel(threads):
            for j in range(steps):
                for l in T.vectorized(lanes):
                    if p * chunk + j * lanes + l < n:
                        a[p * chunk + j * lanes + l] = b[p * chunk + j * lanes + l] + T.float32(3.0) * c[p * chunk + j * lanes + l]

    return triad


def _compile(prim):
    return tvm.compile(tvm.IRModule({"main": prim}), target=host_target())


def _threads(threads: int | None) -> int:
    return max(1, int(threads or tvm_threads() or 1))


def fma_probe(threads: int, iterations: int, lanes: int) -> Callable[..., float]:
    """The FMA kernel compiled once: each call gives GFLOP/s on `threads` threads, best of `runs`
    (default RUNS), so the rate can be read again and again (benchmarks/machine_regimes.py)."""
    f = _compile(_fma_kernel(threads, iterations, lanes))
    x = tvm.runtime.tensor(np.full((threads, CHAINS, lanes), 0.5, "float32"))
    y = tvm.runtime.tensor(np.zeros((threads, CHAINS, lanes), "float32"))
    return lambda runs=RUNS: threads * iterations * CHAINS * lanes * 2 / _best_seconds(f, (x, y), runs) / 1e9


@functools.lru_cache(maxsize=4)
def compute_peak(threads: int | None = None, iterations: int = 400_000) -> dict:
    """Float32 FMA peak on `threads` threads (default: TVM's runtime threads): one core measured,
    times the threads (at most the cores). One core needs only one idle core to measure right, where all of them
    together read low whenever another process runs (the machines irviz is used on are shared);
    the all-thread figure is kept as `measured_all_threads`."""
    threads = _threads(threads)
    info = cpu_info()
    lanes = max(1, info.vector_lanes)
    per_core = fma_probe(1, iterations, lanes)()
    together = fma_probe(threads, iterations, lanes)() if threads > 1 else per_core
    used = min(threads, info.cores)  # threads beyond the cores share them
    gflops = per_core * used
    mhz, clock_source = nominal_clock_mhz()
    units = FMA_UNITS.get(info.isa, 1)
    per_ghz = lanes * units * 2 * used  # GFLOP/s per GHz of clock
    formula = {"vector_lanes": lanes, "vector_lanes_source": f"LLVM target features of {info.mcpu} ({info.isa})",
               "fma_units": units, "fma_units_source": f"assumed for {info.isa} cores",
               "threads": used, "threads_source": "TVM runtime threads (the threads the kernels run on), "
                                                   "at most one per core",
               "clock_mhz": mhz, "clock_source": clock_source,
               "gflops": None if mhz is None else round(per_ghz * mhz / 1000.0, 1),
               "implied_clock_ghz": round(gflops / per_ghz, 2)}
    return {"gflops": round(gflops, 1), "per_core_gflops": round(per_core, 1),
            "measured_all_threads": round(together, 1), "threads": threads, "load": load_average(),
            "source": (f"measured: {CHAINS} independent {lanes}-lane float32 FMA chains, compiled with "
                       f"TVM, on one core (best of {RUNS} runs) x {used} "
                       f"{'core' if threads > used else 'thread'}{'s' * (used > 1)}"),
            "formula": formula}


def triad_probe(threads: int, elements: int, lanes: int) -> Callable[..., float]:
    """The triad kernel compiled once, its arrays allocated once: each call gives GB/s on `threads`
    threads, best of `runs` (default BW_RUNS)."""
    f = _compile(_triad_kernel(elements, threads, lanes))
    rng = np.random.default_rng(0)
    b = tvm.runtime.tensor(rng.random(elements, dtype=np.float32))
    c = tvm.runtime.tensor(rng.random(elements, dtype=np.float32))
    a = tvm.runtime.tensor(np.zeros(elements, "float32"))
    return lambda runs=BW_RUNS: 3 * 4 * elements / _best_seconds(f, (a, b, c), runs) / 1e9


@functools.lru_cache(maxsize=4)
def memory_bandwidth(threads: int | None = None, elements: int = TRIAD_ELEMENTS) -> dict:
    """Memory bandwidth (STREAM triad) on `threads` threads, GB/s (1e9 bytes): the better of all
    threads together and one thread alone (a busy machine slows the former; the threads can always
    move at least what one moves)."""
    threads = _threads(threads)
    lanes = max(1, cpu_info().vector_lanes)
    together = triad_probe(threads, elements, lanes)()
    alone = triad_probe(1, elements, lanes)() if threads > 1 else together
    mib = elements * 4 // (1024 * 1024)
    return {"gbs": round(max(together, alone), 2), "measured_all_threads": round(together, 2),
            "one_thread": round(alone, 2), "threads": threads, "load": load_average(),
            "source": (f"measured: STREAM triad a = b + s*c over 3 x {mib} MiB float32 arrays, compiled "
                       f"with TVM, on {threads} thread{'s' * (threads > 1)} and on one (the better), best "
                       f"of {BW_RUNS} runs each, 12 bytes per element")}
