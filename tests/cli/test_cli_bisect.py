"""`irviz bisect`: a deliberately wrong pass in the middle of an 8-pass pipeline is named, its repro
folder reproduces the mismatch in a fresh process without irviz or torch; a pass that breaks the
build is found in stage "build"; a correct pipeline has no bad step; usage errors exit 2."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from irviz.cli.main import main

PASSES = str(Path(__file__).resolve().parents[1] / "core" / "data" / "bisect_passes.py")
# the wrong pass needs high-level R.add, so it goes before LegalizeOps: 3rd of 8
EIGHT = ("CanonicalizeBindings,ConvertToDataflow,WrongAddToSubtract,LegalizeOps,AnnotateTIROpPattern,"
         "FoldConstant,FuseOps,FuseTIR")
# the repro must run with tvm and numpy only: irviz and torch cannot be imported
NO_IRVIZ = ("import sys, runpy; sys.modules['irviz'] = None; sys.modules['torch'] = None; "
            "sys.argv = ['repro.py']; runpy.run_path('repro.py', run_name='__main__')")


def _bisect(capsys, *argv):
    code = main(["bisect", *argv, "--json", "-"])
    return code, json.loads(capsys.readouterr().out)


def test_wrong_pass_is_named_and_its_repro_reproduces(capsys, tmp_path):
    code, s = _bisect(capsys, "sample:small_cnn", "--passes", PASSES, "--pipeline", EIGHT,
                      "--out", str(tmp_path / "repro"))
    assert code == 1, s
    fb = s["first_bad"]
    assert (fb["index"], fb["pass"], fb["stage"]) == (3, "WrongAddToSubtract", "compare")
    assert fb["max_abs_error"] > 1e-2
    checked = {c["index"]: c["ok"] for c in s["steps_checked"]}
    assert checked[3] is False and all(ok for i, ok in checked.items() if i < 3)
    assert len(checked) < 8  # a search, not every step
    repro = Path(s["repro"])
    assert sorted(p.name for p in repro.iterdir()) == [
        "README.txt", "after.params", "after.py", "before.params", "before.py", "expected.npz",
        "inputs.npz", "repro.py"]
    assert "WrongAddToSubtract" in (repro / "README.txt").read_text()
    assert "R.subtract" in (repro / "after.py").read_text()
    assert "R.subtract" not in (repro / "before.py").read_text()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-c", NO_IRVIZ], cwd=repro, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "before: ok" in run.stdout and "after:  compare" in run.stdout, run.stdout
    assert "REPRODUCED" in run.stdout


def test_pass_that_breaks_the_build_is_found_in_stage_build(capsys):
    code, s = _bisect(capsys, "sample:small_cnn", "--passes", PASSES,
                      "--pipeline", "CanonicalizeBindings,UnbuildableHint,LegalizeOps,FuseOps")
    assert code == 1
    assert s["first_bad"]["pass"] == "UnbuildableHint" and s["first_bad"]["stage"] == "build"
    assert "hint_on_device" in s["first_bad"]["reason"]
    assert s["repro"] is None  # no --out


def test_correct_pipeline_has_no_bad_step(capsys):
    code, s = _bisect(capsys, "sample:mlp", "--pipeline", "zero")
    assert code == 0 and s["first_bad"] is None, s
    assert s["steps_checked"] and all(c["ok"] for c in s["steps_checked"])
    assert s["steps_checked"][0]["max_abs_error"] < 1e-3


def test_usage_errors_exit_2(capsys):
    code, s = _bisect(capsys, "sample:mlp", "--pipeline", "LegalizeOps,NoSuchPass")
    assert code == 2 and "NoSuchPass" in s["error"]
    code, s = _bisect(capsys, "sample:no_such_sample")
    assert code == 2 and s["error"]


def test_bisect_builds_for_the_target_and_refuses_one_not_here(capsys, monkeypatch):
    from irviz.core.backend import build as build_mod

    targets = []
    real_build = build_mod.build
    monkeypatch.setattr(build_mod, "build", lambda mod, target=None: targets.append(target) or real_build(mod, target))
    code, s = _bisect(capsys, "sample:mlp", "--pipeline", "zero", "--target", "x86-avx2")
    if code == 1 and "is not here" in (s.get("error") or ""):
        pytest.skip("this CPU has no AVX2")
    assert code == 0 and s["first_bad"] is None, s
    assert targets and all(t is not None and str(t.attrs["mcpu"]) == "haswell" for t in targets)
    code, s = _bisect(capsys, "sample:mlp", "--pipeline", "zero", "--target", "aarch64")
    assert code == 1 and s["first_bad"] is None
    assert "bisect runs each step it checks, and aarch64 is not here" in s["error"]
