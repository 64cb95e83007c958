"""How a measured decision was measured, and whether it may be kept as final.

A choice timed while other work competed for the cores, or between candidates whose times scatter
more than they differ, says little about this CPU: a tile chosen on a loaded machine stuck in the
cache and was reused on a quiet one. Such a choice is used by the run that measured it, but cached
as *provisional*: a later run measures it again once the machine is quiet, and keeps reusing it
while the machine is still busy (measuring again then would only give another noisy figure).

The thresholds are relative to the cores the machine has and the threads irviz runs with, so they
mean the same on 1 core and on 64:

* the 1-minute load average counts irviz's own threads, so it is "busy" only above
  max(cores, threads) runnable jobs plus a quarter of the threads (at least half a job);
* a timed block whose threads waited for a core (``timing.contention``) is busy whatever the
  load average says;
* the two fastest candidates cannot be told apart when the middle half of their runs is wider
  than STABLE_SPREAD of the median and wider than the gap between them.

    with measuring.recorded() as blocks:
        ...build_and_time...
    rec.update(stamp(blocks, load_before, [(ms, spread), ...], previous))
"""
from __future__ import annotations

import os
import time

from irviz.core.backend import timing
from irviz.core.backend.run import tvm_threads

# A middle half within ±5% of the median is what a quiet machine gives a kernel timed for 20 ms and
# more (measuring.MIN_SECONDS); wider, and a gap between candidates smaller than it is noise.
STABLE_SPREAD = 0.10
# Candidates that stay too close to call this many times on a quiet machine are as good as alike:
# the choice is kept as final rather than measured again on every run.
QUIET_TRIES = 2


def cores() -> int:
    return os.cpu_count() or 1


def load_limit(threads: int, ncores: int | None = None) -> float:
    """The load average above which other work competes with irviz's `threads`: irviz's own threads
    account for up to `threads` of it and cores it leaves idle take as many other jobs; beyond
    that, a quarter of the threads (at least half a job, the average's own jitter)."""
    ncores = ncores or cores()
    threads = max(1, int(threads or 1))
    return max(ncores, threads) + max(0.5, timing.BUSY_SHARE * threads)


def _threads() -> int:
    return tvm_threads() or cores()


def _over(load: float | None, threads: int) -> str | None:
    limit = load_limit(threads)
    if load is not None and load > limit:
        return f"load average {load:.1f} on {cores()} cores (above {limit:.1f} for {threads} threads)"
    return None


def busy_now(threads: int | None = None) -> str | None:
    """Why the machine is too busy to measure a decision on right now, or None when it is quiet."""
    return _over(timing.load_average(), threads or _threads())


def _too_close(options) -> str | None:
    """Why the two fastest of `options` ((ms, spread or None) per candidate that ran) cannot be
    told apart, or None."""
    ran = sorted((o for o in options if o[0] is not None), key=lambda o: o[0])
    if len(ran) < 2:
        return None
    (best, s1), (second, s2) = ran[0], ran[1]
    spread = max(s1 or 0.0, s2 or 0.0)
    gap = (second - best) / best if best > 0 else 0.0
    if spread > STABLE_SPREAD and gap < spread:
        return (f"the two fastest are {gap:.0%} apart while their runs scatter by {spread:.0%} "
                "(middle half of the runs)")
    return None


def stamp(blocks, load_before: float | None, options, previous: dict | None = None,
          threads: int | None = None) -> dict:
    """The fields a decision record gets: "measured" (load average, cores, threads, the widest
    spread, the first contention seen) and, where the figures cannot be trusted, "provisional"
    with why. `blocks`: the timing.Timing blocks the decision rests on; `options`: (ms, spread)
    per candidate; `previous`: the record this one replaces, to count quiet tries."""
    threads = threads or _threads()
    limit = load_limit(threads)
    loads = [x for x in [load_before, *(b.load for b in blocks)] if x is not None]
    peak = max(loads) if loads else None
    contended = next((why for b in blocks for why in [timing.contention(b, threads)] if why), None)
    spreads = [s for _, s in options if s is not None]
    measured = {"load_average": None if peak is None else round(peak, 2), "load_limit": round(limit, 2),
                "cores": cores(), "threads": threads, "spread": round(max(spreads), 3) if spreads else None,
                "contention": contended, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    busy = [why for why in (_over(peak, threads), contended) if why]
    out = {"measured": measured}
    if busy:
        out["provisional"] = "measured while the machine was busy: " + "; ".join(busy)
        return out
    close = _too_close(options)
    if close:
        prev = previous or {}
        tries = 1
        if str(prev.get("provisional") or "").startswith("too close to call"):
            tries += int((prev.get("measured") or {}).get("quiet_tries") or 1)
        measured["quiet_tries"] = tries
        if tries < QUIET_TRIES:
            out["provisional"] = f"too close to call: {close}"
        else:
            out["settled"] = f"too close to call in {tries} quiet measurements; either is as fast"
    return out

