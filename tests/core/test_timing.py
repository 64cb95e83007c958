"""Each runtime's figure agrees with that runtime timed alone: torch eager timed next to a TVM VM
once read up to 100x too slow."""
from __future__ import annotations

import torch

from irviz.core.backend import build as build_mod
from irviz.core.backend import run as run_mod
from irviz.core.backend.timing import describe, machine_busy, time_alone
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
    busy = dict(t.as_dict(), load=64.0, others=None)  # an OS without /proc/stat: the load decides
    assert machine_busy(64.0, 2) and "machine busy (load 64.0)" in describe({"TVM": busy}, 2)
    taken = dict(t.as_dict(), load=3.0, others=0.6)
    assert "machine busy (other processes took 60% of the CPU)" in describe({"TVM": taken}, 2)
    # a high load average from this process's own threads is not a busy machine
    own = dict(t.as_dict(), load=3.0, others=0.0)
    assert "busy" not in describe({"TVM": own}, 2)


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
