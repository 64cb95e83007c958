"""`irviz check` on an IR file with schedule(sch): the course sample passes, its JSON lists each
primitive under its name before the pipeline's passes; a failing primitive fails the check with
its line, listing the primitives before it."""
import json

import pytest

pytest.importorskip("tvm")

from irviz.cli.main import main
from irviz.core.frontend.sample_files import sample_path

PRIMITIVES = ["split", "reorder", "reverse_compute_at", "parallel", "vectorize", "decompose_reduction"]


def check(capsys, spec, *extra):
    code = main(["check", spec, "--json", "-", "--repeats", "1", *extra])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def test_sample_passes_check_with_one_step_per_primitive(capsys):
    code, summary, _ = check(capsys, "sample:course_schedule_steps")
    assert code == 0 and summary["ok"] and summary["allclose"] is True, summary["error"]
    assert summary["reference"] == "reference()"
    names = [s["pass"] for s in summary["steps"]]
    assert names == PRIMITIVES + ["LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR"]
    ours = summary["steps"][:len(PRIMITIVES)]
    assert all(s["origin"] == "schedule" and s["changed_what"] == "ir" for s in ours)
    assert all(s["origin"] == "pass" and "params" not in s for s in summary["steps"][len(PRIMITIVES):])
    assert ours[0]["params"]["code"] == "j0, j1 = sch.split(j, factors=[None, 4])"
    # the pipeline text reruns the passes; the schedule comes with the file
    assert summary["pipeline_text"] == "LegalizeOps,AnnotateTIROpPattern,FoldConstant,FuseOps,FuseTIR"


def test_a_failing_primitive_fails_the_check_at_its_line(capsys, tmp_path):
    src = sample_path("course_schedule_steps").read_text()
    bad = src.replace('sch.parallel(i)', 'sch.parallel(k)')
    path = tmp_path / "parallel_k.py"
    path.write_text(bad)
    line = next(i for i, ln in enumerate(bad.splitlines(), 1) if "sch.parallel(k)" in ln)
    code, summary, err = check(capsys, str(path))
    assert code == 1 and not summary["ok"] and summary["failed_stage"] == "pipeline"
    assert f"parallel_k.py:{line} (sch.parallel(k))" in summary["error"]
    assert "ScheduleError in parallel" in summary["error"]
    assert [s["pass"] for s in summary["steps"]] == ["split", "reorder", "reverse_compute_at"]
    assert summary["tvm_ms"] is None  # nothing was built from a half-applied schedule
    assert f"parallel_k.py:{line}" in err
