"""Each runtime's figure agrees with that runtime timed alone: torch eager timed next to a TVM VM
once read up to 100x too slow."""
from __future__ import annotations

import pytest
import torch

from irviz.core.backend import build as build_mod
from irviz.core.backend import run as run_mod
from irviz.core.backend.timing import contention, describe, machine_busy, time_alone
from irviz.core.frontend.capture import capture
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import LoadedModel


class _Pool(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.avg_pool2d(torch.relu(x), 2)


def _close(a: float, b: float) -> bool:
    # mins, which machine load disturbs least; 0.02 ms absorbs timer noise on sub-0.1 ms figures
    return a <= 2.0 * b + 0.02 and b <= 2.0 * a + 0.02


def test_torch_and_tvm_figures_agree_with_each_timed_alone():
    torch.manual_seed(0)
    loaded = LoadedModel(module=_Pool().eval(), example_inputs=(torch.randn(1, 16, 32, 32),), spec="pool", name="pool")
    built = build_mod.build(import_model(capture(loaded)).mod)
    res = run_mod.run_and_compare(built, loaded, repeats=20)
    assert res.allclose
    import tvm
    from tvm import relax

    main = relax.VirtualMachine(built.executable, tvm.cpu())["main"]
    x = tvm.runtime.tensor(loaded.example_inputs[0].numpy())
    saved = torch.get_num_threads()
    torch.set_num_threads(res.torch_threads)
    try:
        with torch.no_grad():
            torch_alone = time_alone(lambda: loaded.module(*loaded.example_inputs), 20)
    finally:
        torch.set_num_threads(saved)
    tvm_alone = time_alone(lambda: main(x), 20)
    if not res.reliable or contention(torch_alone, res.torch_threads) or contention(tvm_alone, res.threads):
        # on a busy machine a block can be slowed as a whole; the figures say so instead
        assert res.reliable or res.reason
        pytest.skip(f"the machine is busy: {res.reason or 'the figures timed alone were competed with'}")
    t, v = res.torch_timing, res.tvm_timing
    assert _close(t["min_ms"], torch_alone.min_ms), (t, torch_alone)
    assert _close(v["min_ms"], tvm_alone.min_ms), (v, tvm_alone)
    assert t["runs"] >= 20 and v["runs"] >= 20 and t["q1_ms"] <= t["median_ms"] <= t["q3_ms"]
    assert res.torch_ms == t["median_ms"] and res.tvm_ms == v["median_ms"]


def test_the_figures_say_how_they_were_taken():
    t = time_alone(lambda: sum(range(1000)), repeats=8, warmup=1, settle=0)
    assert t.runs == 8 and t.warmup == 1 and t.min_ms <= t.median_ms
    text = describe({"TVM": t, "PyTorch": t.as_dict()}, threads=2)
    assert text.startswith("each timed alone: median of 8 runs, 2 threads")
    assert "TVM min" in text and "PyTorch min" in text
    # an OS without /proc/stat nor schedstat: the load decides
    busy = dict(t.as_dict(), load=64.0, others=None, waited=None)
    assert machine_busy(64.0, 2) and "unreliable: TVM: load average 64.0" in describe({"TVM": busy}, 2)
    taken = dict(t.as_dict(), load=3.0, others=0.6, waited=None)
    assert "unreliable: TVM: other processes took 60% of the CPU" in describe({"TVM": taken}, 2)
    # a high load average from this process's own threads is not a busy machine
    own = dict(t.as_dict(), load=3.0, others=0.0, waited=None)
    assert "unreliable" not in describe({"TVM": own}, 2)
    # where the OS says how long this process's threads waited for a core, that decides
    spared = dict(t.as_dict(), load=3.0, others=0.6, waited=0.0)
    assert "unreliable" not in describe({"TVM": spared}, 2)


def test_another_process_on_the_cores_is_seen_while_timing():
    import os
    import subprocess
    import sys
    import time

    quiet = time_alone(lambda: time.sleep(0.002), repeats=50, settle=0.001)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        busy = time_alone(lambda: time.sleep(0.002), repeats=100, settle=0.001)
    finally:
        spinner.kill()
        spinner.wait()
    cores = os.cpu_count() or 1
    assert busy.others is not None and busy.others >= 0.8 / cores
    if quiet.others > 1 - 0.8 / cores:
        pytest.skip(f"the cores were already {quiet.others:.0%} taken before the spinner started: "
                    "no room left to see it")
    assert busy.others > quiet.others


def test_a_figure_to_show_is_timed_for_long_enough_not_just_a_few_calls():
    import time

    t0 = time.perf_counter()
    t = time_alone(lambda: time.sleep(0.002), repeats=3, warmup=1, settle=0.001)
    elapsed = time.perf_counter() - t0
    # millisecond calls: the counts are met at once, the block goes on for its minimum time
    assert t.runs > 3 and t.warmup > 1 and elapsed >= 0.2
    slow = time_alone(lambda: time.sleep(0.12), repeats=2, warmup=0, settle=0.001)
    assert slow.runs == 2  # two calls already pass the minimum time: nothing added


class _Clock:
    """A stand-in for a /proc reading that grows by `step` at each read."""

    def __init__(self, step: float):
        self.value, self.step = 0.0, step

    def __call__(self):
        self.value += self.step
        return self.value


def test_a_block_whose_threads_waited_for_a_core_is_unreliable_and_says_why(monkeypatch):
    from irviz.core.backend import timing

    quiet = timing.Timing(median_ms=1.0, min_ms=0.9, q1_ms=0.95, q3_ms=1.05, runs=100, warmup=3,
                          load=5.0, others=0.7, waited=0.02)
    # other processes ran, but not on cores this block needed: its figure stands
    assert timing.contention(quiet, threads=2) is None
    assert timing.judge({"TVM": quiet, "PyTorch": quiet.as_dict()}, 2) == (True, None)
    # every read of this process's run delay has grown by 10 s: its threads waited all along
    monkeypatch.setattr(timing, "_run_delay", _Clock(10.0))
    busy = time_alone(lambda: None, repeats=5, settle=0)
    assert busy.waited is not None and busy.waited > 1
    reliable, reason = timing.judge({"TVM": quiet, "PyTorch": busy}, 2)
    assert reliable is False and reason.startswith("PyTorch: its threads waited for a core")
    text = describe({"TVM": quiet, "PyTorch": busy}, threads=2)
    assert "unreliable: PyTorch: its threads waited" in text and "trust the min" not in text
    # the clean block is shown before a faster-looking competed one, the fastest of several clean
    slow_clean = timing.Timing(**dict(quiet.as_dict(), median_ms=2.0))
    fast_busy = timing.Timing(**dict(quiet.as_dict(), median_ms=0.5, waited=1.5))
    assert timing.best([fast_busy, slow_clean, quiet], threads=2) is quiet
    assert timing.best([fast_busy], threads=2) is fast_busy


def test_without_schedstat_the_share_other_processes_took_decides(monkeypatch):
    from irviz.core.backend import timing

    t = timing.Timing(median_ms=1.0, min_ms=0.9, q1_ms=0.95, q3_ms=1.05, runs=100, warmup=3,
                      load=3.0, others=0.6, waited=None)
    assert "other processes took 60% of the CPU" in timing.contention(t, 2)
    assert timing.contention(dict(t.as_dict(), others=0.1), 2) is None


def test_settling_waits_for_a_spinning_pool_to_sleep(monkeypatch):
    import os

    from irviz.core.backend import timing

    # the other threads use 10 ms of CPU per 10 ms slept three times (a pool spinning), then none
    readings = iter([0.0, 0.01, 0.02, 0.03, 0.03, 0.03])
    monkeypatch.setattr(timing, "_other_threads_cpu", lambda: next(readings))
    monkeypatch.setattr(timing, "_other_threads_running", lambda: 0)
    slept = []
    waited = timing.settle_threads(0.01, longest=1.0, sleep=slept.append)
    assert slept == [0.01] * 4 and abs(waited - 0.04) < 1e-9
    # workers that yield use next to no CPU on a busy core, but stay runnable: waited for too
    running = iter([1, 1, 0])
    monkeypatch.setattr(timing, "_other_threads_cpu", lambda: 0.0)
    monkeypatch.setattr(timing, "_other_threads_running", lambda: next(running))
    slept.clear()
    timing.settle_threads(0.01, longest=1.0, sleep=slept.append)
    assert slept == [0.01] * 3
    # TVM's pool is told to sleep soon after a call (it reads this when it starts)
    assert int(os.environ["TVM_THREAD_POOL_SPIN_COUNT"]) <= 10000
    # a pool that never sleeps is waited for no longer than `longest`
    monkeypatch.setattr(timing, "_other_threads_cpu", _Clock(0.01))
    slept.clear()
    assert timing.settle_threads(0.01, longest=0.05, sleep=slept.append) <= 0.05 + 1e-9


def test_run_marks_figures_timed_on_busy_cores_unreliable_after_more_rounds(monkeypatch):
    from irviz.core.backend import timing

    torch.manual_seed(0)
    loaded = LoadedModel(module=_Pool().eval(), example_inputs=(torch.randn(1, 4, 8, 8),), spec="pool", name="pool")
    built = build_mod.build(import_model(capture(loaded)).mod)
    calls = []
    real = timing.time_alone
    monkeypatch.setattr(run_mod, "time_alone", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(timing, "_run_delay", _Clock(10.0))
    monkeypatch.setattr(run_mod, "MAX_EXTRA_SECONDS", 1e9)   # rounds are not cut short by a slow machine
    res = run_mod.run_and_compare(built, loaded, repeats=3)
    assert res.allclose and res.reliable is False
    assert "waited for a core" in res.reason and f"after {run_mod.MAX_ROUNDS} rounds" in res.reason
    assert len(calls) == 1 + 2 * run_mod.MAX_ROUNDS        # torch first, then TVM and torch each round
    # a machine where nothing waited: one round, reliable
    monkeypatch.setattr(timing, "_run_delay", lambda: 0.0)
    calls.clear()
    res = run_mod.run_and_compare(built, loaded, repeats=3)
    assert res.reliable is True and res.reason is None and len(calls) == 3
