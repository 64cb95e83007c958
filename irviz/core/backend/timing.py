"""Timing one runtime at a time, so a figure says what that runtime takes when it runs alone.

Timing torch eager and the TVM VM alternately in one loop distorted torch's figure by up to 100×
(Swinv2 small: 311.7 ms in the loop against 6.9 ms alone): each runtime's worker threads are still
awake from its last call when the other starts, and on a 2-core machine one thread pool waits a
whole time slice for a descheduled worker. So each runtime runs in a block of its own, after its own
warm-up and a short pause that lets the other pool's workers go back to sleep.

    t = time_alone(lambda: vm_main(*args), repeats=10)
    t.median_ms, t.min_ms, t.q1_ms, t.q3_ms, t.runs

The median is the figure shown; min and the quartiles say how far a run strayed. On a busy machine
the minimum is the closest to the runtime's own speed, so ``others`` (the CPU time other processes
took while the block ran) and the load average travel with the figures, and the views say when the
machine was busy.
"""
from __future__ import annotations

import os
import statistics
import time
from dataclasses import asdict, dataclass
from collections.abc import Callable

# TVM's pool spins for a while after a parallel launch before its workers sleep, and torch's OpenMP
# threads do the same (GOMP_SPINCOUNT); 20 ms covers both on the machines measured so far.
SETTLE_SECONDS = 0.02
# A block shorter than this reads a sub-millisecond model up to 2x slow: right after an idle pause
# (the settle above, or the other runtime's block) the first milliseconds of work run slower
# (measured on a 2-core VM: the MLP sample read 0.04 ms in a 3000-run block and 0.07–0.09 ms in a
# 300-run one after a pause). So warm-up and timed runs go on until these many seconds have passed
# as well as until their counts are reached; a 40 ms model is not affected.
WARMUP_SECONDS = 0.05
MIN_BLOCK_SECONDS = 0.2
MAX_RUNS = 20000


@dataclass(frozen=True)
class Timing:
    median_ms: float
    min_ms: float
    q1_ms: float
    q3_ms: float
    runs: int
    warmup: int
    load: float | None  # 1-minute load average when timed (None where the OS has none)
    # share of the machine's CPU time other processes took while the block ran (0: none, 1: every
    # core); None where the OS does not say (no /proc/stat)
    others: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median (0.05: the middle half within ±2.5%)."""
        return (self.q3_ms - self.q1_ms) / self.median_ms if self.median_ms > 0 else 0.0


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


BUSY_SHARE = 0.25


def machine_busy(load: float | None, threads: int, others: float | None = None) -> bool:
    """Whether other work competed for the cores while timing. `others` (what other processes took
    during the block) decides where the OS gives it; the load average counts this process's own
    threads as well, so it is only the fallback: more runnable jobs than the cores left over."""
    if others is not None:
        return others > BUSY_SHARE
    cores = os.cpu_count() or 1
    return load is not None and load > max(0.5, cores - threads + 0.5)


def _cpu_seconds() -> tuple[float, float] | None:
    """(CPU seconds all processes have used, CPU seconds this process has used), or None."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
    except OSError:
        return None
    # user nice system idle iowait irq softirq steal ...: busy is all but idle and iowait
    ticks = [int(x) for x in fields[:8]]
    busy = sum(ticks) - ticks[3] - ticks[4]
    t = os.times()
    return busy / os.sysconf("SC_CLK_TCK"), t.user + t.system


def _others_share(before, after, wall: float) -> float | None:
    if before is None or after is None or wall <= 0:
        return None
    total, own = after[0] - before[0], after[1] - before[1]
    return round(max(0.0, total - own) / (wall * (os.cpu_count() or 1)), 3)


def _quartiles(xs: list[float]) -> tuple[float, float]:
    if len(xs) < 4:
        return min(xs), max(xs)
    q = statistics.quantiles(xs, n=4)
    return q[0], q[2]


def time_alone(fn: Callable[[], object], repeats: int = 10, warmup: int = 2,
               settle: float = SETTLE_SECONDS, min_seconds: float | None = None,
               warmup_seconds: float | None = None) -> Timing:
    """After a pause of `settle` seconds, call `fn` untimed at least `warmup` times, then timed at
    least `repeats` times. Both also go on until `warmup_seconds` / `min_seconds` have passed (by
    default WARMUP_SECONDS / MIN_BLOCK_SECONDS when `settle` > 0, a figure to show; none for a quick
    comparison), at most MAX_RUNS calls each. Exceptions from `fn` propagate."""
    repeats, warmup = max(1, int(repeats)), max(0, int(warmup))
    if min_seconds is None:
        min_seconds = MIN_BLOCK_SECONDS if settle > 0 else 0.0
    if warmup_seconds is None:
        warmup_seconds = WARMUP_SECONDS if min_seconds > 0 else 0.0
    if settle > 0:
        time.sleep(settle)
    done, start = 0, time.perf_counter()
    while done < warmup or (time.perf_counter() - start < warmup_seconds and done < MAX_RUNS):
        fn()
        done += 1
    times, cpu_before, start = [], _cpu_seconds(), time.perf_counter()
    while len(times) < repeats or (time.perf_counter() - start < min_seconds and len(times) < MAX_RUNS):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    others = _others_share(cpu_before, _cpu_seconds(), time.perf_counter() - start)
    q1, q3 = _quartiles(times)
    return Timing(median_ms=statistics.median(times), min_ms=min(times), q1_ms=q1, q3_ms=q3,
                  runs=len(times), warmup=done, load=load_average(), others=others)


def describe(timings: dict, threads: int | None = None) -> str:
    """One line for the views, e.g. "each timed alone: median of 10 runs, 2 threads · TVM min 0.61 ms,
    middle half 0.61–0.69 · PyTorch min 9.4 ms, middle half 9.7–16 · machine busy (load 2.9):
    trust the min". `timings`: {"TVM": Timing or its dict (or None), "PyTorch": ...}."""
    ts = {who: (t if isinstance(t, dict) else t.as_dict()) for who, t in timings.items() if t}
    if not ts:
        return ""
    first = next(iter(ts.values()))
    head = (("each timed alone: " if len(ts) > 1 else "timed: ") + f"median of {first['runs']} runs"
            + (f", {threads} thread{'s' if threads != 1 else ''}" if threads else ""))
    parts = [head] + [f"{who} min {t['min_ms']:.3g} ms, middle half {t['q1_ms']:.3g}–{t['q3_ms']:.3g}"
                      for who, t in ts.items()]
    load = max((t["load"] for t in ts.values() if t.get("load") is not None), default=None)
    shares = [t["others"] for t in ts.values() if t.get("others") is not None]
    others = max(shares) if shares else None
    if machine_busy(load, threads or 1, others):
        why = f"other processes took {others:.0%} of the CPU" if others is not None else f"load {load:.1f}"
        parts.append(f"machine busy ({why}): trust the min")
    return " · ".join(parts)


_tuned = [0.0]


def add_tune_seconds(seconds: float) -> None:
    """Count time spent measuring candidates (library vs TensorIR, tile sizes) on this machine."""
    _tuned[0] += seconds


def tune_seconds() -> float:
    """Seconds spent measuring in this process so far (callers take differences)."""
    return _tuned[0]
