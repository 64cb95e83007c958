"""Inductor's kernels timed: the torch profiler over warm calls of the compiled model, each
call's event matched to the wrapper's kernel calls in order, the median over runs per call; and
the compiled model's whole time, timed alone (no profiler) in its own block, as TVM's and torch's
runs are (backend/timing.py).

Inside Inductor's region ("## Call CompiledFxGraph ... ##") the profiler sees each generated C++
kernel as its RecordFunction ("graph_0_cpp_fused_relu_0") and each library call as its operator
("aten::convolution"): the region's direct children. A call with no event there has no time
(None), never a guessed one.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from irviz.core.backend.timing import Timing, time_alone
from irviz.core.peer.output_code import KernelCall, profiler_key

__all__ = ["PeerTimes", "time_inductor"]

_REGION = "## Call CompiledFxGraph"


@dataclass
class PeerTimes:
    call_ms: list[list[float | None]]  # per graph, per call of its call(): median ms per run
    compiled: Timing                   # the compiled model's whole call, timed alone
    profiled: Timing                   # the profiled calls' block (its contention, not its times)
    region_ms: float | None            # Inductor's call() as the profiler saw it (median per run)
    runs: int                          # profiled runs


def _match(children, calls: list[KernelCall]) -> list[float | None]:
    """Each call's event time (ms), matched in order: the next child whose name ends with the
    call's profiler key; a call with none gets None."""
    out: list[float | None] = []
    j = 0
    for c in calls:
        key = profiler_key(c)
        for i in range(j, len(children)):
            name = children[i].name
            if name == key or name.endswith("_" + key) or name.split("::")[-1] == key:
                out.append(children[i].cpu_time_total / 1e3)
                j = i + 1
                break
        else:
            out.append(None)
    return out


def time_inductor(build, calls: list[list[KernelCall]], repeats: int = 10) -> PeerTimes:
    """Time `build` (an InductorBuild) on its own thread count: the whole call alone, then
    `repeats` profiled calls (at least 5) for the kernels."""
    before = torch.get_num_threads()
    torch.set_num_threads(build.threads)
    try:
        compiled = time_alone(build, repeats=repeats, warmup=3)
        runs = max(5, int(repeats))
        for _ in range(3):
            build()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            # through time_alone for its account of who else had the cores meanwhile
            profiled = time_alone(build, repeats=runs, warmup=0, min_seconds=0.0, warmup_seconds=0.0)
    finally:
        torch.set_num_threads(before)
    regions = sorted((e for e in prof.events() if e.name.startswith(_REGION)),
                     key=lambda e: e.time_range.start)
    n = len(calls)
    per_call: list[list[list[float]]] = [[[] for _ in cs] for cs in calls]
    region_runs: list[float] = []
    for r, ev in enumerate(regions):
        g = r % n
        children = sorted(ev.cpu_children, key=lambda e: e.time_range.start)
        for k, ms in enumerate(_match(children, calls[g])):
            if ms is not None:
                per_call[g][k].append(ms)
        region_runs.append(ev.cpu_time_total / 1e3)
    call_ms = [[statistics.median(xs) if xs else None for xs in g] for g in per_call]
    # one run calls every graph once: the run's region time is the sum over its graphs
    per_run = [sum(region_runs[i:i + n]) for i in range(0, len(region_runs) - n + 1, n)]
    return PeerTimes(call_ms=call_ms, compiled=compiled, profiled=profiled,
                     region_ms=statistics.median(per_run) if per_run else None, runs=len(per_run))

