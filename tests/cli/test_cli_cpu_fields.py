"""check --json says on which CPU, how each figure was taken, how long each stage took and what the
pipeline decided by measuring."""
import json

import pytest

from irviz.cli.main import main


def test_check_json_names_the_cpu_the_timing_the_stages_and_the_decisions(capsys):
    code = main(["check", "sample:small_cnn", "--pipeline", "fast-cpu", "--json", "-", "--repeats", "4"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0, summary["error"]
    cpu = summary["cpu"]
    assert cpu["model"] and cpu["mcpu"] and cpu["isa"] and cpu["vector_lanes"] in (4, 8, 16)
    assert json.loads(cpu["target"])["kind"] == "llvm"
    for who in ("tvm", "torch"):
        t = summary["timing"][who]
        assert t["runs"] >= 4 and t["threads"] >= 1
        assert t["min_ms"] <= t["median_ms"] and t["q1_ms"] <= t["q3_ms"]
    assert summary["tvm_ms"] == round(summary["timing"]["tvm"]["median_ms"], 4)
    stages = summary["stage_seconds"]
    assert {"load", "capture", "import", "pipeline", "tune", "build", "run"} <= set(stages)
    assert 0 <= stages["tune"] <= stages["pipeline"]
    kinds = {d["kind"] for d in summary["decisions"]}
    assert "library_or_tir" in kinds
    for d in summary["decisions"]:
        if d["kind"] == "library_or_tir":
            assert d["choice"] in ("torch", "tir") and d["workload"].split()[0] in ("conv2d", "matmul")
    # the roofline: measured roofs with their sources; per kernel, figures consistent with its time
    r = summary["roofline"]
    assert r["peak_gflops"] > 0 and "measured" in r["peak_source"] and r["bandwidth_gbs"] > 0
    assert r["peak"]["formula"]["vector_lanes"] == cpu["vector_lanes"]
    assert r["threads"] == summary["threads"]
    assert r["kernels"] and all(e["flops"] for e in r["kernels"])
    for e in r["kernels"]:
        assert e["gflops"] == pytest.approx(e["flops"] / e["ms"] / 1e6, rel=1e-4)
        assert e["pct_of_roof"] == pytest.approx(100 * e["gflops"] / e["roof_gflops"], rel=1e-4)
        assert e["bound"] == ("compute" if e["intensity"] >= e["ridge_intensity"] else "memory")
    gbs = [lv["gbs"] for lv in r["levels"]]   # one roof per memory level, fastest first, memory's last
    assert r["levels"][-1]["level"] == "DRAM" and gbs == sorted(gbs, reverse=True)


def test_check_json_says_whether_the_figures_can_be_trusted(capsys, monkeypatch):
    from irviz.core.backend import run as run_mod
    from irviz.core.backend import timing

    grows = iter(range(0, 10**9, 10))       # every read: 10 s more waiting for a core
    monkeypatch.setattr(timing, "_run_delay", lambda: float(next(grows)))
    monkeypatch.setattr(run_mod, "MAX_ROUNDS", 2)
    code = main(["check", "sample:mlp", "--json", "-", "--repeats", "2"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0, summary["error"]
    assert summary["reliable"] is False
    assert "waited for a core" in summary["reason"] and "after 2 rounds" in summary["reason"]
    assert summary["timing"]["torch"]["waited"] > 1 and summary["torch_ms"] > 0
