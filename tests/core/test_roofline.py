"""The roofline per kernel: FLOPs and bytes from the TIR (and a library call's shapes), figures that
follow the measured time, and roofs measured on this machine."""
import math

import pytest

pytest.importorskip("tvm")

from irviz.core.backend import machine_peak
from irviz.core.backend.roofline import kernel_work, roofline
from irviz.core.passes.pipelines import get_pipeline
from irviz.core.passes.registry import PassInvocation
from irviz.core.workspace import Workspace


@pytest.fixture(scope="module")
def small_cnn_run():
    """small_cnn (conv 3->8 on 8x8, batchnorm, relu, linear 512->10): its conv2d sent to torch, the
    rest TensorIR through the zero pipeline."""
    ws = Workspace()
    ws.open("sample:small_cnn", planned=[PassInvocation("LibraryDispatch", {"ops": "conv2d", "min_macs": 0}),
                                         *get_pipeline("zero")])
    ws.run_to_end()
    return ws.build_run(repeats=2)


def _by_name(kernels, part):
    found = [k for k in kernels if part in k.name]
    assert len(found) == 1, [k.name for k in kernels]
    return found[0]


def test_work_of_a_tir_kernel_and_of_a_library_call(small_cnn_run):
    built, res = small_cnn_run
    work = kernel_work(built, res.kernels)
    linear = _by_name(res.kernels, "matmul")
    # 2 FLOPs per multiply-add of x(1x512) @ W(512x10), 1 per bias add; every parameter once
    assert work[linear.name] == (2 * 512 * 10 + 10, 4 * (512 + 512 * 10 + 10 + 10))
    conv = _by_name(res.kernels, "irviz.torch.conv2d")
    # out 1x8x8x8, each 3 channels x 3x3 multiply-adds; x 1x3x8x8, w 8x3x3x3, out
    assert work[conv.name] == (2 * 512 * 27, 4 * (192 + 216 + 512))
    bn = _by_name(res.kernels, "batch_norm")
    assert work[bn.name][0] > 0 and work[bn.name][1] >= 4 * 2 * 512


def test_figures_follow_the_measured_time(small_cnn_run):
    built, res = small_cnn_run
    roofs = {"peak": {"gflops": 100.0, "source": "given"}, "bandwidth": {"gbs": 10.0, "source": "given"}}
    r = roofline(built, res.kernels, roofs)
    assert r["ridge_intensity"] == 10.0 and r["peak_source"] == "given"
    assert [e["name"] for e in r["kernels"]] == [k.name for k in res.kernels]
    for k, e in zip(res.kernels, r["kernels"]):
        assert e["flops"] is not None, e
        assert e["gflops"] == pytest.approx(e["flops"] / (k.ms / 1e3) / 1e9, rel=1e-3)
        assert e["gbs"] == pytest.approx(e["bytes"] / (k.ms / 1e3) / 1e9, rel=1e-3)
        assert e["intensity"] == pytest.approx(e["flops"] / e["bytes"], rel=1e-3)
        assert e["roof_gflops"] == pytest.approx(min(100.0, 10.0 * e["intensity"]), rel=1e-3)
        assert e["bound"] == ("compute" if e["intensity"] >= 10.0 else "memory")
        assert e["pct_of_roof"] == pytest.approx(100 * e["gflops"] / e["roof_gflops"], rel=1e-3)
        assert e["in_cache"] is True  # kilobytes
    t = r["total"]
    assert t["flops"] == sum(e["flops"] for e in r["kernels"])
    assert t["gflops"] == pytest.approx(t["flops"] / sum(k.ms for k in res.kernels) / 1e6, rel=1e-3)


def test_roofs_are_measured_here():
    peak = machine_peak.compute_peak(1, iterations=20_000)
    f = peak["formula"]
    assert peak["threads"] == 1 and "measured" in peak["source"]
    # faster than one scalar FMA per cycle at the nominal clock: the kernel ran on vector FMAs
    clock = f["clock_mhz"] / 1000 if f["clock_mhz"] else 1.0
    assert peak["gflops"] > 2 * 2 * clock
    assert f["implied_clock_ghz"] == pytest.approx(
        peak["gflops"] / (f["vector_lanes"] * f["fma_units"] * 2), rel=0.01)
    bw = machine_peak.memory_bandwidth(1, elements=1 << 20)
    assert math.isfinite(bw["gbs"]) and bw["gbs"] > 0.1 and "triad" in bw["source"]
    size, name = machine_peak.last_level_cache()
    assert size is None or (size >= 64 * 1024 and name.startswith("L"))
