"""The roofline per kernel: FLOPs and bytes from the TIR (and a library call's shapes), figures that
follow the measured time, and roofs measured on this machine."""
import math

import pytest

pytest.importorskip("tvm")

from irviz.core.backend import machine_peak
from irviz.core.backend.roofline import kernel_work, roofline
from irviz.core.passes.named_pipelines import get_pipeline
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


def test_each_memory_level_has_a_measured_roof_fastest_first():
    from irviz.core.backend.cache_roofs import cache_bandwidths, cache_sizes, hierarchy

    sizes, source = cache_sizes()
    caches = cache_bandwidths(1, target_s=2e-4)
    dram = machine_peak.memory_bandwidth(1, elements=1 << 20)
    levels = hierarchy(caches["levels"], dram, caches["dram_sweep"])
    names = [lv["level"] for lv in levels]
    assert names[-1] == "DRAM" and names[:-1] == [c["level"] for c in sizes]
    assert names[:-1] == sorted(names[:-1]) and len(set(names)) == len(names)
    if not sizes:
        assert caches["note"] and "memory's roof" in caches["note"]
    for lv in levels:
        assert math.isfinite(lv["gbs"]) and lv["gbs"] > 0.1 and lv["source"], lv
    gbs = [lv["gbs"] for lv in levels]
    assert gbs == sorted(gbs, reverse=True)  # L1 >= L2 >= L3 >= DRAM, whatever the noise did
    caps = [lv["capacity_bytes"] for lv in levels[:-1]]
    assert caps == sorted(caps) and all(c > 0 for c in caps)
    for lv in levels:
        if lv.get("adjusted"):  # raised to the slower level's figure, and says so
            assert "raised" in lv["adjusted"] and lv["measured_gbs"] < lv["gbs"]


def test_a_level_measured_under_a_slower_one_is_raised_and_says_so():
    from irviz.core.backend.cache_roofs import hierarchy

    caches = [{"level": "L1", "gbs": 300.0, "capacity_bytes": 32768},
              {"level": "L2", "gbs": 40.0, "capacity_bytes": 1 << 20},
              {"level": "L3", "gbs": 60.0, "capacity_bytes": 32 << 20}]
    levels = hierarchy(caches, {"gbs": 50.0, "source": "triad"}, {"gbs": 45.0, "source": "sweep"})
    assert [(lv["level"], lv["gbs"]) for lv in levels] == [("L1", 300.0), ("L2", 60.0), ("L3", 60.0),
                                                           ("DRAM", 50.0)]
    assert levels[1]["measured_gbs"] == 40.0 and "under L3's 60" in levels[1]["adjusted"]
    assert levels[0]["adjusted"] is None and levels[2]["adjusted"] is None
    assert levels[3]["source"] == "triad"  # the better of the triad and the sweep


LEVELS = [{"level": "L1", "gbs": 400.0, "capacity_bytes": 8 * 1024, "source": "given"},
          {"level": "L2", "gbs": 200.0, "capacity_bytes": 64 * 1024, "source": "given"},
          {"level": "L3", "gbs": 100.0, "capacity_bytes": 1 << 20, "source": "given"},
          {"level": "DRAM", "gbs": 10.0, "capacity_bytes": None, "source": "given"}]


def _roofs(peak, scale=1.0):
    levels = [dict(lv, gbs=lv["gbs"] * scale) for lv in LEVELS]
    return {"peak": {"gflops": peak, "source": "given"}, "bandwidth": {"gbs": 10.0 * scale, "source": "given"},
            "levels": levels}


def test_each_kernel_is_held_against_the_roof_of_the_level_its_working_set_fits(small_cnn_run):
    built, res = small_cnn_run
    r = roofline(built, res.kernels, _roofs(1e6, scale=1e4))
    assert [lv["level"] for lv in r["levels"]] == ["L1", "L2", "L3", "DRAM"]
    conv = next(e for e in r["kernels"] if "conv2d" in e["name"])
    linear = next(e for e in r["kernels"] if "matmul" in e["name"])
    # conv: 3.7 kB per call fits the 8 KiB L1; the linear layer's 22.6 kB (its 512x10 weight) does not
    assert conv["working_set_bytes"] == 4 * (192 + 216 + 512) and conv["level"] == "L1"
    assert linear["working_set_bytes"] == 4 * (512 + 5120 + 10 + 10) and linear["level"] == "L2"
    for e in r["kernels"]:
        lv = next(lv for lv in LEVELS if lv["capacity_bytes"] is None or e["working_set_bytes"] <= lv["capacity_bytes"])
        assert e["level"] == lv["level"] and e["level_gbs"] == lv["gbs"] * 1e4
        assert e["roof_gflops"] == pytest.approx(min(1e6, e["level_gbs"] * e["intensity"]), rel=1e-3)
        assert e["pct_of_roof"] == pytest.approx(100 * e["gflops"] / e["roof_gflops"], rel=1e-3)
        assert e["bound"] == ("compute" if e["intensity"] >= 1e6 / e["level_gbs"] else "memory")
        assert e["above_roof"] is False and e["above_roof_reason"] is None
    # all kernels together against the sum of each one's shortest time at its own roof
    t = r["total"]
    shortest = sum(max(e["flops"] / 1e15, e["bytes"] / (e["level_gbs"] * 1e9)) for e in r["kernels"])
    assert t["roof_ms"] == pytest.approx(shortest * 1e3, rel=1e-3)
    assert t["pct_of_roof"] == pytest.approx(100 * shortest * 1e3 / sum(k.ms for k in res.kernels), rel=1e-3)
    assert 0 < t["pct_of_roof"] <= 100 and t["above_roof"] is False


def test_a_kernel_timed_above_its_roof_says_so(small_cnn_run):
    from types import SimpleNamespace

    built, res = small_cnn_run
    # 10 µs each, the first one's time marked unreliable by the run
    fast = [SimpleNamespace(name=k.name, calls=k.calls, ms=0.01, binding=k.binding, reliable=i != 0,
                            reason="waited for a core" if i == 0 else None) for i, k in enumerate(res.kernels)]
    r = roofline(built, fast, _roofs(1e6, scale=1e-5))  # 4 MB/s and less: every kernel passes its roof
    for e in r["kernels"]:
        assert e["pct_of_roof"] > 100 and e["above_roof"] is True
        reason = e["above_roof_reason"]
        assert f"faster than the {e['level']} roof measured here" in reason and "byte count is off" in reason
    assert r["kernels"][0]["reliable"] is False and "waited for a core" in r["kernels"][0]["above_roof_reason"]
    assert r["kernels"][1]["reliable"] is True and "not reliable" not in r["kernels"][1]["above_roof_reason"]
    assert r["total"]["above_roof"] is True and "timed above their roof" in r["total"]["above_roof_reason"]
    # a compute-bound kernel passes the FMA peak, not a bandwidth
    r = roofline(built, fast, _roofs(1e-6, scale=1e9))
    assert all(e["bound"] == "compute" and "FMA peak" in e["above_roof_reason"] for e in r["kernels"])


EMBEDDING = '''
import torch


class Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.table = torch.nn.Embedding(4096, 64)

    def forward(self, ids):
        return self.table(ids) * 2.0


def get_model():
    return Embed(), (torch.randint(0, 4096, (1, 16), generator=torch.Generator().manual_seed(0)),)
'''


def test_a_gather_counts_the_rows_it_reads_not_the_whole_table(tmp_path):
    path = tmp_path / "embed.py"
    path.write_text(EMBEDDING)
    ws = Workspace()
    ws.open(str(path), planned=get_pipeline("zero"))
    ws.run_to_end()
    built, res = ws.build_run(repeats=2)
    take = _by_name(res.kernels, "take")
    _, nbytes = kernel_work(built, res.kernels)[take.name]
    rows = 4 * 16 * 64  # the 16 rows of 64 float32 it reads, and as much written
    assert 2 * rows <= nbytes <= 2 * rows + 8 * 16 < 4 * 4096 * 64  # + the 16 indices; the table is 1 MiB
    r = roofline(built, res.kernels, _roofs(1e6, scale=1e4))
    assert next(e for e in r["kernels"] if e["name"] == take.name)["level"] == "L2"  # 8 kB: not the table's DRAM


def test_cache_roofs_read_again_a_disturbed_level_and_merge_one_too_small_to_measure(monkeypatch):
    from types import SimpleNamespace

    from irviz.core.backend import cache_roofs

    sizes = [{"level": "L1", "bytes": 32 << 10, "shared_by": 1}, {"level": "L2", "bytes": 1 << 20, "shared_by": 1},
             {"level": "L3", "bytes": 2 << 20, "shared_by": 0}]  # no bigger than the two L2s together
    reads = []

    def probe(threads, per_thread, lanes, target_s):
        def measure(runs=cache_roofs.RUNS):
            reads.append((per_thread, threads, runs))
            if per_thread <= 32 << 10:  # L1: another process on the core through the first read
                return 300.0 if runs > cache_roofs.RUNS else 20.0
            return 150.0 if per_thread <= 1 << 20 else 20.0
        return measure

    monkeypatch.setattr(cache_roofs, "cache_sizes", lambda: (sizes, "given"))
    monkeypatch.setattr(cache_roofs, "cpu_info", lambda: SimpleNamespace(vector_lanes=8, cores=2))
    monkeypatch.setattr(cache_roofs, "sweep_probe", probe)
    got = cache_roofs.cache_bandwidths.__wrapped__(2)
    l1, l2, l3 = got["levels"]
    assert (l1["gbs"], l1["remeasured"]) == (600.0, True)  # one thread's 300 on each of the 2 cores
    assert l1["one_thread"] == 300.0 and f"best of {3 * cache_roofs.RUNS} calls" in l1["source"]
    assert l2["gbs"] == 300.0 and "remeasured" not in l2
    assert (l3["gbs"], l3["merged_into"]) == (300.0, "L2") and "not measured apart" in l3["source"]
    # L2 on both threads and on one, read again beside the disturbed L1; the L3 (as big a share) not swept
    assert len([r for r in reads if r[0] == 512 << 10]) == 4
    assert got["dram_sweep"]["gbs"] == 20.0 and got["note"] is None


def test_all_kernels_together_is_no_figure_when_most_of_their_time_has_no_known_work(small_cnn_run):
    from types import SimpleNamespace

    built, res = small_cnn_run
    known = [SimpleNamespace(name=k.name, calls=k.calls, ms=0.01, binding=k.binding) for k in res.kernels]
    # an extern whose FLOPs nobody knows takes nearly all the time
    opaque = SimpleNamespace(name="my_extern_linear", calls=1, ms=10.0, binding=None)
    r = roofline(built, [*known, opaque], _roofs(1e6, scale=1e4))
    t = r["total"]
    assert t["gflops"] is None and t["pct_of_peak"] is None and t["pct_of_roof"] is None
    assert t["known_share"] < 0.5 and "1 kernel(s) is not known" in t["unknown_reason"]
    # the same kernels alone: a figure, over all of their time
    r = roofline(built, known, _roofs(1e6, scale=1e4))
    assert r["total"]["gflops"] > 0 and r["total"]["known_share"] == 1.0 and r["total"]["unknown_reason"] is None
