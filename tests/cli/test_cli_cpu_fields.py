"""check --json says on which CPU, how each figure was taken, how long each stage took and what the
pipeline decided by measuring."""
import json

from irviz.cli import main


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
