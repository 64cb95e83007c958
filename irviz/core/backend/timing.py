"""Timing one runtime at a time, so a figure says what that runtime takes when it runs alone.

Timing torch eager and the TVM VM alternately in one loop distorted torch's figure by up to 100×
(Swinv2 small: 311.7 ms in the loop against 6.9 ms alone): each runtime's worker threads are still
awake from its last call when the other starts, and on a 2-core machine one thread pool waits a
whole time slice for a descheduled worker. So each runtime runs in a block of its own, after its own
warm-up and a short pause that lets the other pool's workers go back to sleep.

    t = time_alone(lambda: vm_main(*args), repeats=10)
    t.median_ms, t.min_ms, t.q1_ms, t.q3_ms, t.runs

The median is the figure shown; min and the quartiles say how far a run strayed. ``others`` (the CPU
time other processes took while the block ran), ``waited`` (how long this process's own threads were
ready to run but had no core) and the load average travel with the figures.

A busy machine does not only add noise: on 2 cores with one other job, torch's 2-thread pool waits a
whole time slice for a descheduled worker at each parallel op, and a whole block read 24 ms for a
model that takes 0.03 ms (the minimum too, so "trust the min" was no help). So a figure is only
shown as reliable when its block's threads did not wait for a core (``judge``); the caller repeats
blocks while they did, and says why when none was clean.
"""
from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from collections.abc import Callable

# TVM's pool spins for a while after a parallel launch before its workers sleep, and torch's OpenMP
# threads do the same (GOMP_SPINCOUNT); 20 ms covers both on a quiet machine, settle_threads the rest.
SETTLE_SECONDS = 0.02
# TVM's workers yield 300,000 times before they sleep. Each yield on a busy core gives it away for a
# time slice, so after a TVM run its workers stayed runnable through torch's whole block (one
# pinned to a core torch's pool needed: torch's threads waited for a core 118% of the time with
# three of ours runnable). A thousand yields still bridge the microseconds between one call's
# kernels (hf_vit sample alone: 0.080 ms either way). TVM reads it when its pool starts.
os.environ.setdefault("TVM_THREAD_POOL_SPIN_COUNT", "1000")
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
    # this process's threads ready to run but without a core, on average over the block (0.5: one
    # thread waited half the time); None where the OS does not say (no schedstat)
    waited: float | None = None

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
# The share of the time a block's threads may wait for a core before its figure is unreliable.
# Blocks slowed 1000x on 2 cores (load average 7) waited 80% of the time.
WAIT_SHARE = 0.1
# A pool's workers spin after a parallel call (TVM: 300,000 yields; torch's OpenMP: GOMP_SPINCOUNT);
# until they sleep they take cores from the next block. settle_threads waits for them, this long at most.
MAX_SETTLE_SECONDS = 1.0


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


def _run_delay() -> float | None:
    """Seconds this process's threads have spent ready to run but waiting for a core (Linux
    schedstat), or None. Threads that exit are no longer counted: read it across a block."""
    total = 0
    try:
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[1])
            except FileNotFoundError:   # the thread exited meanwhile
                continue
    except (OSError, ValueError, IndexError):
        return None
    return total / 1e9


def _other_thread_stats():
    """The fields after the command name of /proc/self/task/<tid>/stat, for every thread of this
    process but the calling one (a thread that exits meanwhile is skipped)."""
    me = str(threading.get_native_id())
    for tid in os.listdir("/proc/self/task"):
        if tid == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                yield f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue


def _other_threads_cpu() -> float | None:
    """CPU seconds used so far by this process's threads other than the calling one, or None."""
    try:
        total = sum(int(fields[11]) + int(fields[12]) for fields in _other_thread_stats())  # utime, stime
    except (OSError, ValueError, IndexError):
        return None
    return total / os.sysconf("SC_CLK_TCK")


def _other_threads_running() -> int:
    """How many of this process's threads other than the calling one are running or ready to."""
    try:
        return sum(fields[0] == "R" for fields in _other_thread_stats())
    except (OSError, IndexError):
        return 0


def settle_threads(minimum: float = SETTLE_SECONDS, longest: float = MAX_SETTLE_SECONDS,
                   sleep: Callable[[float], None] = time.sleep) -> float:
    """Sleep `minimum` seconds, then until this process's other threads stop using CPU and none is
    runnable (a pool's workers still spinning from the last runtime's calls: a yielding worker uses
    little CPU on a busy core but stays runnable), at most `longest` seconds in all. Returns the
    seconds waited."""
    waited, step = 0.0, max(minimum, 0.01)
    before = _other_threads_cpu()
    sleep(minimum)
    waited += minimum
    while before is not None and waited + step <= longest:
        after = _other_threads_cpu()
        # the clock ticks in 10 ms: under one tick in a 10 ms sleep is threads asleep
        if after is None or (after - before < 0.5 * step and not _other_threads_running()):
            break
        before = after
        sleep(step)
        waited += step
    return waited


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
        settle_threads(settle)
    done, start = 0, time.perf_counter()
    while done < warmup or (time.perf_counter() - start < warmup_seconds and done < MAX_RUNS):
        fn()
        done += 1
    times, cpu_before, delay_before, start = [], _cpu_seconds(), _run_delay(), time.perf_counter()
    while len(times) < repeats or (time.perf_counter() - start < min_seconds and len(times) < MAX_RUNS):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    wall = time.perf_counter() - start
    others = _others_share(cpu_before, _cpu_seconds(), wall)
    delay_after = _run_delay()
    waited = (round(max(0.0, delay_after - delay_before) / wall, 3)
              if delay_before is not None and delay_after is not None and wall > 0 else None)
    q1, q3 = _quartiles(times)
    return Timing(median_ms=statistics.median(times), min_ms=min(times), q1_ms=q1, q3_ms=q3,
                  runs=len(times), warmup=done, load=load_average(), others=others, waited=waited)


def contention(t: Timing | dict | None, threads: int = 1) -> str | None:
    """Why a block's figure cannot be trusted, or None when nothing competed with it. Where the OS
    says how long this process's threads waited for a core, that decides: other processes that ran
    on cores this block did not need took nothing from it. Elsewhere the `others` share and the
    load average do (machine_busy)."""
    if not t:
        return None
    d = t if isinstance(t, dict) else t.as_dict()
    waited, others = d.get("waited"), d.get("others")
    if waited is not None:
        share = waited / max(1, threads)
        if share <= WAIT_SHARE:
            return None
        why = f"its threads waited for a core {share:.0%} of the time"
        return why + (f", other processes took {others:.0%} of the CPU" if others is not None else "")
    if machine_busy(d.get("load"), threads, others):
        return (f"other processes took {others:.0%} of the CPU" if others is not None
                else f"load average {d.get('load'):.1f}")
    return None


def best(blocks: list[Timing], threads: int = 1) -> Timing:
    """The block to show: the fastest of the uncontended ones, else the fastest (competition only
    adds time)."""
    clean = [b for b in blocks if contention(b, threads) is None]
    return min(clean or blocks, key=lambda b: b.median_ms)


def judge(timings: dict, threads: int = 1) -> tuple[bool, str | None]:
    """(reliable, reason) for figures shown side by side: `timings` {"TVM": Timing or dict or None,
    "PyTorch": ...}. Unreliable when any shown block was competed with; the reason names which."""
    reasons = [f"{who}: {why}" for who, t in timings.items() if t
               for why in [contention(t, threads)] if why]
    return (not reasons, "; ".join(reasons) or None)


def describe(timings: dict, threads: int | None = None) -> str:
    """One line for the views, e.g. "each timed alone: median of 10 runs, 2 threads · TVM min 0.61 ms,
    middle half 0.61–0.69 · PyTorch min 9.4 ms, middle half 9.7–16 · unreliable: PyTorch: its
    threads waited for a core 60% of the time". `timings`: {"TVM": Timing or its dict (or None),
    "PyTorch": ...}. A min is no escape when a block was slowed as a whole, so none is offered."""
    ts = {who: (t if isinstance(t, dict) else t.as_dict()) for who, t in timings.items() if t}
    if not ts:
        return ""
    first = next(iter(ts.values()))
    head = (("each timed alone: " if len(ts) > 1 else "timed: ") + f"median of {first['runs']} runs"
            + (f", {threads} thread{'s' if threads != 1 else ''}" if threads else ""))
    parts = [head] + [f"{who} min {t['min_ms']:.3g} ms, middle half {t['q1_ms']:.3g}–{t['q3_ms']:.3g}"
                      for who, t in ts.items()]
    reliable, reason = judge(ts, threads or 1)
    if not reliable:
        parts.append(f"unreliable: {reason}")
    return " · ".join(parts)


_tuned = [0.0]


def add_tune_seconds(seconds: float) -> None:
    """Count time spent measuring candidates (library vs TensorIR, tile sizes) on this machine."""
    _tuned[0] += seconds


def tune_seconds() -> float:
    """Seconds spent measuring in this process so far (callers take differences)."""
    return _tuned[0]
