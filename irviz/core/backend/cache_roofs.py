"""The memory side of a hierarchical roofline: how fast this CPU moves data from each cache level,
measured at the thread count the kernels run on, once per process.

    sizes, source = cache_sizes()        # [{"level": "L1", "bytes": 32768, "shared_by": 1}, ...]
    roofs = cache_bandwidths(threads)    # {"levels": [{"level": "L1", "gbs": ...}], "dram_sweep", "note"}
    levels = hierarchy(roofs["levels"], memory_bandwidth(threads), roofs["dram_sweep"])
                                         # L1 >= L2 >= L3 >= DRAM, fastest first

Sizes come from the OS: ``/sys/devices/system/cpu/cpu0/cache/index*`` (level, type, size, the CPUs
that share it), else ``lscpu -C`` (then L1 and L2 are taken as private to a core and the larger
levels as shared by all cores, as on every x86 and Arm server we know of). Instruction caches are
left out. Where neither is readable there are no cache levels and every kernel is held against
memory's roof; ``note`` says why.

Bandwidth of a level: one kernel, compiled with TVM once per vector width (its sizes are runtime
arguments), sweeps ``a[i] = a[i] * s + b[i]`` over float32 arrays that together fill half of the
level (across the instances the threads use: a private L2 on each of 2 cores holds twice one),
`reps` times in a row inside the kernel so that one call lasts about half a millisecond and the
cost of the call does not count (one thread: a serial loop, outside TVM's thread pool). 12 bytes
per element and sweep (two reads, one write), as the STREAM triad counts them: in a cache there is
no write-allocate traffic to leave out. The update reads what the previous sweep wrote, so the
compiler cannot drop the repeats. The best of `RUNS` calls, on all the threads together and on one
thread with the same share of the array; the roof is the better of the former and one thread's
figure times the instances of the level the threads use (a private L2 on each of 2 cores: 2; one
shared L3: 1), as each instance serves its own cores and a shared machine slows the all-thread
figure whenever another process runs.

Memory ("DRAM") is swept the same way over at least 4x what the caches hold (128 MiB at least,
1 GiB at most), and its roof is the better of that and machine_peak's STREAM triad: the triad's
write-allocate reads are not counted, so a kernel that mostly reads can pass the triad's figure.

A level that is not at least twice the size of the faster levels across the threads cannot be
measured apart from them: it gets the faster level's roof (``merged_into``) and says so.
"""
from __future__ import annotations

import functools
import glob
import math
import subprocess
import time

import numpy as np
import tvm
from tvm.script import tirx as T

from irviz.core.backend.timing import load_average
from irviz.core.target import cpu_info
from irviz.core.tvm_compat import host_target

RUNS = 25  # short calls, many of them: on a shared machine some land in a quiet moment
TARGET_SECONDS = 5e-4  # one call of the sweep: long enough that the call's own cost is noise
SWEEP_BYTES = 12  # per element and sweep: a and b read, a written
DRAM_BYTES = 128 * 1024 ** 2  # at least 4x the caches: the sweep over memory
DRAM_MAX_BYTES = 1024 ** 3  # past this a huge L3 may still hold part of it: the roof reads high, not low
FILL = 0.5  # of the level's capacity: the rest is left to the stack, the code and the page tables

__all__ = ["cache_bandwidths", "cache_sizes", "hierarchy", "instances", "sweep_probe"]


def _parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(text[-1:], 1)
    return int(float(text.rstrip("KMG").strip()) * mult)


def _cpu_list_len(text: str) -> int:
    n = 0
    for part in text.strip().split(","):
        if "-" in part:
            lo, hi = part.split("-")
            n += int(hi) - int(lo) + 1
        elif part:
            n += 1
    return n


def _sysfs_caches() -> list[dict]:
    found = []
    for d in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
        try:
            with open(f"{d}/type", encoding="utf-8") as fh:
                kind = fh.read().strip()
            with open(f"{d}/level", encoding="utf-8") as fh:
                level = int(fh.read())
            with open(f"{d}/size", encoding="utf-8") as fh:
                size = _parse_size(fh.read())
            try:
                with open(f"{d}/shared_cpu_list", encoding="utf-8") as fh:
                    shared = max(1, _cpu_list_len(fh.read()))
            except OSError:
                shared = 1 if level <= 2 else 0
        except (OSError, ValueError):
            continue
        if kind != "Instruction" and size > 0:
            found.append({"level": f"L{level}", "bytes": size, "shared_by": shared})
    return found


def _lscpu_caches() -> list[dict]:
    out = subprocess.run(["lscpu", "-B", "-C=NAME,ONE-SIZE,LEVEL,TYPE"], capture_output=True, text=True,
                         timeout=10, check=True).stdout
    found = []
    for line in out.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 4 or parts[3] == "Instruction":
            continue
        level = int(parts[2])
        found.append({"level": f"L{level}", "bytes": int(parts[1]), "shared_by": 1 if level <= 2 else 0})
    return found


@functools.lru_cache(maxsize=1)
def cache_sizes() -> tuple[list[dict], str]:
    """([{"level", "bytes" (one instance), "shared_by" (CPUs per instance; 0: all)}], source),
    fastest level first; ([], why) where the OS does not say."""
    caches, source = _sysfs_caches(), "/sys/devices/system/cpu/cpu0/cache"
    if not caches:
        try:
            caches, source = _lscpu_caches(), "lscpu -C (L1 and L2 taken as private, larger levels as shared)"
        except (OSError, ValueError, IndexError, subprocess.SubprocessError):
            caches = []
    if not caches:
        return [], ("no cache sizes: neither /sys/devices/system/cpu/cpu0/cache nor lscpu -C lists them, "
                    "so every kernel is held against memory's roof")
    by_level: dict[str, dict] = {}
    for c in caches:  # a level listed twice (a split L1): the data cache is the one kernels stream through
        by_level.setdefault(c["level"], c)
    return sorted(by_level.values(), key=lambda c: int(c["level"][1:])), source


def instances(cache: dict, threads: int, cpus: int) -> int:
    """How many instances of `cache` `threads` threads use, one thread per CPU, placed together."""
    shared = cache["shared_by"] or cpus
    return max(1, math.ceil(min(threads, cpus) / shared))


def _sweep_kernel(lanes: int, parallel: bool):
    L = lanes
    outer = T.parallel if parallel else T.serial

    @T.prim_func
    def sweep(pa: T.handle, pb: T.handle, threads: T.int32, steps: T.int32, reps: T.int32):
        n = T.int32()
        a = T.match_buffer(pa, (n,), "float32")
        b = T.match_buffer(pb, (n,), "float32")
        for p in outer(threads):
            for _r in range(reps):
                for j in range(steps):
                    for l in T.vectorized(L):
                        a[(p * steps + j) * L + l] = a[(p * steps + j) * L + l] * T.float32(0.999) + b[(p * steps + j) * L + l]

    return sweep


@functools.lru_cache(maxsize=8)
def _compiled_sweep(lanes: int, parallel: bool):
    return tvm.compile(tvm.IRModule({"main": _sweep_kernel(lanes, parallel)}), target=host_target())


def sweep_probe(threads: int, per_thread_bytes: int, lanes: int, target_s: float = TARGET_SECONDS):
    """GB/s of the sweep on `threads` threads over `per_thread_bytes` (both arrays) each, best of
    `runs` calls; the repeats per call chosen so that a call lasts about `target_s`. One thread runs
    a serial loop: a parallel loop of one task still waits for every worker of TVM's pool to check
    in, and on a busy machine one of them is often off its core."""
    f = _compiled_sweep(lanes, threads > 1)
    steps = max(1, per_thread_bytes // (8 * lanes))
    n = threads * steps * lanes
    a = tvm.runtime.tensor(np.full(n, FILL, "float32"))
    b = tvm.runtime.tensor(np.full(n, 0.25, "float32"))

    def timed(reps: int) -> float:
        t = time.perf_counter()
        f(a, b, threads, steps, reps)
        return time.perf_counter() - t

    timed(1)  # page faults, the thread pool
    reps = 1
    while (dt := timed(reps)) < target_s / 8 and reps < 1 << 30:
        reps *= 8
    reps = max(1, round(reps * target_s / max(dt, 1e-9)))

    def measure(runs: int = RUNS) -> float:
        return SWEEP_BYTES * n * reps / min(timed(reps) for _ in range(runs)) / 1e9

    return measure


@functools.lru_cache(maxsize=4)
def cache_bandwidths(threads: int, target_s: float = TARGET_SECONDS) -> dict:
    """{"levels": [one per data cache level, fastest first], "dram_sweep": the sweep over memory,
    "note": why there are no cache levels, or None}."""
    caches, source = cache_sizes()
    note = None if caches else source
    info = cpu_info()
    lanes, cpus = max(1, info.vector_lanes), max(1, info.cores)
    levels, below, again = [], 0, {}  # below: bytes the faster levels hold across the threads
    for c in caches:
        count = instances(c, threads, cpus)
        capacity = c["bytes"] * count
        e = {"level": c["level"], "bytes": c["bytes"], "instances": count, "capacity_bytes": capacity,
             "private": c["shared_by"] == 1, "threads": threads, "size_source": source, "merged_into": None}
        working = int(capacity * FILL)
        if levels and working < 2 * below:
            e.update(gbs=levels[-1]["gbs"], merged_into=levels[-1]["merged_into"] or levels[-1]["level"],
                     source=(f"not measured apart: half of it ({working >> 10} KiB) is not twice what the faster "
                             f"levels hold across the threads ({below >> 10} KiB); {levels[-1]['level']}'s roof"))
        else:
            again[c["level"]] = _measured(threads, count, working, lanes, target_s)
            e.update(again[c["level"]]())
        below = max(below, capacity)
        levels.append(e)
    # memory through the same sweep: it counts every byte it moves (the triad's write-allocate
    # reads are not counted), so kernels that mostly read can pass the triad's figure but not this one
    again["DRAM"] = _measured(threads, 1, min(max(4 * below, DRAM_BYTES), DRAM_MAX_BYTES), lanes, target_s)
    dram = again["DRAM"]()
    # a level read slower than the one behind it was disturbed (another process on its core for
    # the whole of its runs): both are read once more, over a longer stretch, and the better kept
    order = [e for e in levels if e["level"] in again] + [dram]
    for faster, slower in zip(order, order[1:]):
        if faster["gbs"] < slower.get("gbs", 0):
            for e in (faster, slower):
                name = e.get("level", "DRAM")
                better = again[name](3 * RUNS)
                if better["gbs"] > e["gbs"]:
                    e.update(better, remeasured=True)
    for e in levels:
        if e["merged_into"]:
            e["gbs"] = next(x["gbs"] for x in levels if x["level"] == e["merged_into"])
    return {"levels": levels, "dram_sweep": dram, "note": note}


def _measured(threads: int, count: int, working: int, lanes: int, target_s: float):
    """The sweep over `working` bytes on all `threads` and on one, compiled and filled once: each
    call (best of `runs`) gives the roof, the better of the all-thread figure and one thread's
    times the `count` instances of the level the threads use."""
    per_thread = max(8 * lanes, working // threads)
    on_all = sweep_probe(threads, per_thread, lanes, target_s)
    on_one = sweep_probe(1, per_thread, lanes, target_s) if threads > 1 else on_all
    how = (f"the better of all threads and one thread's figure x {count} (each of the {count} instances "
           "the threads use serves its own cores)" if count > 1
           else "the better of all threads and one" if threads > 1 else "one thread")

    def measure(runs: int = RUNS) -> dict:
        together = on_all(runs)
        alone = on_one(runs) if threads > 1 else together
        return {"gbs": round(max(together, alone * count), 2), "measured_all_threads": round(together, 2),
                "one_thread": round(alone, 2), "load": load_average(),
                "source": (f"measured: a = a*s + b swept over {working >> 10} KiB of float32 "
                           f"({per_thread >> 10} KiB per thread) on {threads} thread{'s' * (threads > 1)}, "
                           f"best of {runs} calls, 12 bytes per element; {how}")}

    return measure


def hierarchy(caches: list[dict], dram: dict, dram_sweep: dict | None = None) -> list[dict]:
    """The levels fastest first, memory ("DRAM": the better of the STREAM triad `dram` and the
    sweep over memory) last, each at least as fast as every level after it: a level measured slower
    than a slower one was disturbed (another process, a clock step), and is raised to that one's
    figure with `adjusted` saying so (a roof must not sit under what the level behind it delivers)."""
    out = [dict(c) for c in caches]
    mem = {"level": "DRAM", "gbs": float(dram["gbs"]), "capacity_bytes": None, "merged_into": None,
           "source": dram.get("source", ""), "load": dram.get("load"), "triad_gbs": float(dram["gbs"])}
    if dram_sweep and dram_sweep["gbs"] > mem["gbs"]:
        mem.update(gbs=dram_sweep["gbs"], load=dram_sweep.get("load"),
                   source=f"{dram_sweep['source']} (the STREAM triad read {dram['gbs']:g} GB/s: "
                          f"{dram.get('source', '')})")
    out.append(mem)
    for e in out:
        e.setdefault("adjusted", None)
    for i in range(len(out) - 2, -1, -1):
        slower = out[i + 1]
        if out[i]["gbs"] < slower["gbs"]:
            out[i]["adjusted"] = (f"measured {out[i]['gbs']:g} GB/s, under {slower['level']}'s "
                                  f"{slower['gbs']:g}: raised to it (a faster level cannot be slower; the "
                                  "measurement was disturbed, e.g. by another process)")
            out[i]["measured_gbs"] = out[i]["gbs"]
            out[i]["gbs"] = slower["gbs"]
    return out
