"""Per-kernel times, taken the way the whole run is timed and checked against it.

A second VM with an instrument (the timed VM stays uninstrumented) runs the function in a block of
its own (``timing.time_alone``: after the other runtime's pool has gone to sleep, warmed up, the
fresh VM's cold first run left out). ``KernelTime.ms`` is the median over the block's runs of the
kernel's total time in one run: a mean over three runs lets one run that lost a time slice count
a third of that slice. Neither statistic helps when the whole block is competed with: on a loaded
2-core VM one parallel matmul of a ConvNeXt-like model read 3.6 ms per call beside same-sized
siblings of 0.05 ms (a worker descheduled at each parallel launch), so the figures are checked.

Two checks say when the figures are still not to be trusted:

* the sum: the kernels are a part of the run, so per run they cannot take more than the run takes.
  Past ``SUM_RATIO`` × the run + ``SUM_SLACK_MS`` + ``PER_CALL_MS`` per call the whole table is
  marked (``KernelTimes.reliable`` / ``reason``, both figures in the reason). The block is first
  taken again, up to ``MAX_BLOCKS`` times, while it was competed with or over that limit.
* each large kernel alone, when the figures are in doubt (the sum over its limit, the block competed
  with, or one run of the kernel far slower than its median): the calls of the slowest kernels
  are captured with copies of their real arguments and timed again one by one, outside the VM
  (not otherwise: see ``_retimed``). A kernel whose time in the run and alone differ by more than
  ``ALONE_FACTOR`` (and ``ALONE_SLACK_MS`` + ``PER_CALL_MS`` per call) is marked
  (``KernelTime.reliable`` / ``reason``); ``alone_ms`` keeps the figure alone.
"""
from __future__ import annotations

import math
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import NamedTuple

import tvm
import tvm_ffi
from tvm import relax

from irviz.core.backend.timing import Timing, contention, time_alone

# The instrument's own work falls partly inside each kernel's window: a Python callback returns
# before the kernel starts and is entered after it ends. Measured on an AMD EPYC (2 cores): a
# 4-element add reads 0.88 µs per call in the window, 0.17 µs per call in the uninstrumented run,
# 0.28 µs timed alone, so about 0.7 µs per call; 3 µs leaves room for a slower or busier host.
PER_CALL_MS = 0.003
# Kernels that add up to more than the run by this factor (plus the slack below) are not what the
# run spent: the run's median and the kernels' medians come from blocks timed a moment apart, each
# with its own noise; 25% leaves room for that, while a kernel that lost a time slice per call
# (milliseconds in a run of a fraction of one) is far past it.
SUM_RATIO = 1.25
SUM_SLACK_MS = 0.05
# A kernel timed alone runs with its operands in cache, which can make a memory-bound kernel a
# few times faster than in the run; beyond this factor the figure is disturbance, not cache.
ALONE_FACTOR = 4.0
ALONE_SLACK_MS = 0.05
# The instrumented block: at least this many counted runs and this many seconds.
MIN_RUNS, MAX_RUNS = 3, 5
BLOCK_SECONDS = 0.1
# Blocks taken while the last one was competed with or its kernels added up to too much.
MAX_BLOCKS = 3
MAX_EXTRA_SECONDS = 1.0
# Kernels re-timed alone: the slowest always, then those with this share of the sum, at most
# RETIMED; when the sum is over its limit, the RETIMED_OVER slowest.
RETIMED, RETIMED_OVER, RETIMED_SHARE = 3, 5, 0.1
# Calls of one kernel captured and timed alone (the rest counted at their mean), and the most
# bytes of argument copies held for one kernel.
ALONE_CALLS = 8
ALONE_MAX_BYTES = 256 << 20
ALONE_RUNS, ALONE_SECONDS = 5, 0.01


@dataclass
class KernelTime:
    name: str
    calls: int  # calls per run of the function
    ms: float  # total ms per run of the function: the median over the instrumented runs
    binding: str | None  # var in the function calling it; several joined by ", "
    # False when the kernel's time in the run and its time alone disagree (`reason` gives both)
    reliable: bool = True
    reason: str | None = None
    alone_ms: float | None = None  # the same calls timed alone, per run; None: not re-timed


@dataclass
class KernelTimes:
    kernels: list[KernelTime]  # slowest first
    # False when the kernels add up to more than the run allows, or their runs were competed
    # with; `reason` says which, with the figures
    reliable: bool = True
    reason: str | None = None
    # the instrumented block (timing.Timing.as_dict of whole instrumented runs) and how many
    # blocks were taken
    timing: dict | None = None

    @property
    def sum_ms(self) -> float:
        return sum(k.ms for k in self.kernels)


def kernel_names(build_result) -> set[str]:
    """PrimFuncs of the built and lowered modules, and call_dps_packed externs."""
    names: set[str] = set()
    for m in (build_result.lowered, build_result.mod):
        if m is None:
            continue
        for gv, f in m.functions.items():
            if isinstance(f, tvm.tirx.PrimFunc):
                names.add(gv.name_hint)
    names.update(build_result.bindings)
    return names


def sum_limit_ms(model_ms: float, calls: int) -> float:
    """The most the kernels of one run may add up to before they are marked."""
    return SUM_RATIO * model_ms + SUM_SLACK_MS + PER_CALL_MS * calls


def check_sum(kernels: list[KernelTime], model_ms: float | None) -> str | None:
    """Why the kernels cannot be what a run of `model_ms` spent, or None."""
    if model_ms is None or not math.isfinite(model_ms) or not kernels:
        return None
    total, calls = sum(k.ms for k in kernels), sum(k.calls for k in kernels)
    limit = sum_limit_ms(model_ms, calls)
    if total <= limit:
        return None
    return (f"the kernels add up to {total:.3g} ms per run, more than the whole run's {model_ms:.3g} ms "
            f"allows ({limit:.3g} ms: {SUM_RATIO}× it, plus {SUM_SLACK_MS} ms and the instrument's "
            f"cost for {calls} calls)")


def check_alone(k: KernelTime) -> str | None:
    """Why the kernel's time in the run and alone disagree, or None (also when not re-timed)."""
    if k.alone_ms is None or k.calls <= 0:
        return None
    lo, hi = sorted((k.ms, k.alone_ms))
    if hi - lo <= ALONE_SLACK_MS + PER_CALL_MS * k.calls or hi <= ALONE_FACTOR * lo:
        return None
    apart = f"{hi / lo:.0f}× apart" if lo > 0 else "apart"
    return (f"{k.ms / k.calls:.3g} ms per call in the run, {k.alone_ms / k.calls:.3g} ms per call "
            f"timed alone with the same arguments ({apart})")


def _is_gpu(dev) -> bool:
    return dev.dlpack_device_type() != tvm.cpu().dlpack_device_type()


def _block(fn, inputs, runs: int, gpu: bool, dev) -> tuple[Timing, list[tuple[dict, dict]]]:
    """One instrumented block: its Timing and, per counted run, ({symbol: seconds}, {symbol: calls})."""
    total: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    per_run: list[tuple[dict, dict]] = []
    stack: list[float] = []

    def instrument(func, func_symbol, before_run, ret_value, *args):
        if gpu:  # a kernel's time is from the device idle before it to the device idle after it
            dev.sync()
        if before_run:
            stack.append(time.perf_counter())
        else:
            dt = time.perf_counter() - stack.pop()
            total[str(func_symbol)] += dt
            calls[str(func_symbol)] += 1
        return relax.VMInstrumentReturnKind.NO_OP

    def one_run():
        total.clear()
        calls.clear()
        fn(*inputs)
        per_run.append((dict(total), dict(calls)))

    fn.vm.set_instrument(tvm_ffi.convert(instrument))
    # warm-up 1: the fresh VM's first run allocates its storage and finds the weights out of cache,
    # which read up to 10x on single kernels (MobileNet-V2's second conv)
    t = time_alone(one_run, repeats=runs, warmup=1, min_seconds=BLOCK_SECONDS)
    return t, per_run[-t.runs:]


class _Block(NamedTuple):
    timing: Timing
    kernels: list[KernelTime]
    over: str | None  # check_sum's reason
    contended: str | None  # timing.contention's reason
    scattered: set[str]  # kernels with a run far slower than their median


def _kernels_of(per_run, known: set[str], bindings: dict) -> tuple[list[KernelTime], set[str]]:
    names = {n for secs, _ in per_run for n in secs if n in known and not n.startswith("vm.builtin.")}
    out, scattered = [], set()
    for n in names:
        secs = [s.get(n, 0.0) * 1e3 for s, _ in per_run]
        ms = statistics.median(secs)
        out.append(KernelTime(name=n, calls=int(round(statistics.median(c.get(n, 0) for _, c in per_run))),
                              ms=ms, binding=bindings.get(n)))
        if max(secs) > ALONE_FACTOR * ms and max(secs) - ms > ALONE_SLACK_MS:
            scattered.add(n)
    out.sort(key=lambda k: k.ms, reverse=True)
    return out, scattered


class _VMFunc:
    """vm[func] that keeps its VM at hand, so the instrument can be swapped between blocks."""

    def __init__(self, vm, func: str):
        self.vm, self.f = vm, vm[func]

    def __call__(self, *args):
        return self.f(*args)


def _copy(a, dev, budget: list[int]):
    if isinstance(a, tvm.runtime.Tensor):
        budget[0] -= int(math.prod(a.shape)) * tvm.runtime.DataType(a.dtype).itemsize
        return a.copyto(dev)
    return a


def _capture(fn, inputs, names: set[str], dev) -> dict[str, list]:
    """One more run, keeping (function, copies of its arguments) of the first ALONE_CALLS calls of
    each kernel in `names`. Copies, taken before the call: an in-place kernel timed alone must not
    change the caller's tensors, and must read what it read in the run."""
    calls: dict[str, list] = defaultdict(list)
    budget: dict[str, list[int]] = defaultdict(lambda: [ALONE_MAX_BYTES])

    def instrument(func, func_symbol, before_run, ret_value, *args):
        name = str(func_symbol)
        if before_run and name in names and len(calls[name]) < ALONE_CALLS and budget[name][0] > 0:
            copied = [_copy(a, dev, budget[name]) for a in args]
            if budget[name][0] >= 0:
                calls[name].append((func, copied))
        return relax.VMInstrumentReturnKind.NO_OP

    fn.vm.set_instrument(tvm_ffi.convert(instrument))
    fn(*inputs)
    return calls


def _alone_ms(captured: list, calls: int, gpu: bool, dev, threads: int) -> float | None:
    """Ms per run of `calls` calls, from the captured ones timed one by one (None: none captured)."""
    if not captured:
        return None
    total = 0.0
    for func, args in captured:
        def call(func=func, args=args):
            func(*args)
            if gpu:
                dev.sync()

        t = None
        for _ in range(2):  # once more when the block was competed with
            t = time_alone(call, repeats=ALONE_RUNS, warmup=1, settle=0, min_seconds=ALONE_SECONDS,
                           warmup_seconds=ALONE_SECONDS / 2)
            if contention(t, threads) is None:
                break
        total += t.median_ms
    return total * calls / len(captured)


def _retimed(b: _Block) -> list[KernelTime]:
    """The kernels to time alone: when the figures are already in doubt (over the sum's limit,
    competed with) the slowest; otherwise those of the slowest whose runs scattered. A kernel
    whose figures hold is left alone: timed alone its operands stay in cache, and a kernel that
    streams its weights from memory in the run would read far faster and be marked for nothing."""
    if b.over or b.contended:
        return b.kernels[:RETIMED_OVER]
    total = sum(k.ms for k in b.kernels) or 1.0
    top = b.kernels[:1] + [k for k in b.kernels[1:RETIMED] if k.ms >= RETIMED_SHARE * total]
    return [k for k in top if k.name in b.scattered]


def time_kernels(build_result, dev, inputs, *, model_ms: float | None, repeats: int = 10,
                 func: str = "main", threads: int = 1) -> KernelTimes:
    """Per-kernel times of `func` on `inputs` (TVM tensors on `dev`), checked against `model_ms`
    (the function's median time per run, timed uninstrumented). Exceptions from the VM propagate."""
    gpu = _is_gpu(dev)
    fn = _VMFunc(relax.VirtualMachine(build_result.executable, dev), func)
    known = kernel_names(build_result)
    bindings = build_result.bindings_of(func) if hasattr(build_result, "bindings_of") else build_result.bindings
    runs = max(MIN_RUNS, min(int(repeats), MAX_RUNS))

    blocks: list[_Block] = []
    start = time.perf_counter()
    while len(blocks) < MAX_BLOCKS:
        t, per_run = _block(fn, inputs, runs, gpu, dev)
        kernels, scattered = _kernels_of(per_run, known, bindings)
        blocks.append(_Block(t, kernels, check_sum(kernels, model_ms), contention(t, threads), scattered))
        if not (blocks[-1].over or blocks[-1].contended) or time.perf_counter() - start > MAX_EXTRA_SECONDS:
            break
    # competition and disturbance only add time: the block with the smallest sum, uncontended first
    best = min(blocks, key=lambda b: (b.contended is not None, sum(k.ms for k in b.kernels)))
    t, kernels, over, contended = best.timing, best.kernels, best.over, best.contended

    chosen = _retimed(best)
    try:
        captured = _capture(fn, inputs, {k.name for k in chosen}, dev) if chosen else {}
    except Exception:  # the check is extra: a run that worked does not fail over it
        captured = {}
    for k in chosen:
        try:
            k.alone_ms = _alone_ms(captured.get(k.name) or [], k.calls, gpu, dev, threads)
        except Exception:  # e.g. an extern that cannot be called twice on the same arguments
            k.alone_ms = None
        k.reason = check_alone(k)
        k.reliable = k.reason is None

    reasons = [over] if over else []
    if contended:
        reasons.append(f"the instrumented runs were competed with: {contended}")
    timing = dict(t.as_dict(), blocks=len(blocks))
    return KernelTimes(kernels=kernels, reliable=not reasons, reason="; ".join(reasons) or None,
                       timing=timing)
