"""Write repro folder from the engine: the folder of the step asked for says only what happened
(no "engine died" when it did not), carries the bisect's verdict of that step, and its repro.py
says plainly whether it reproduced (exit 1) or not (exit 0)."""
import subprocess
import sys
from pathlib import Path

import pytest

PASSES = str(Path(__file__).resolve().parent / "data" / "bisect_passes.py")


@pytest.fixture(scope="module")
def engine():
    import irviz.engine as engine_mod

    e = engine_mod.Engine(type("C", (), {"send": lambda self, m: None})())
    calls = iter(range(1, 10_000))

    def call(cmd, **args):
        reply = e.handle({"id": next(calls), "cmd": cmd, "args": args})
        assert reply["ok"], reply
        return reply["result"]

    call("load_pass_file", path=PASSES)
    call("open", spec="sample:mlp", pipeline="WrongAddToSubtract,LegalizeOps")
    return call


def _run(folder: Path):
    return subprocess.run([sys.executable, "repro.py"], cwd=folder, capture_output=True, text=True,
                          timeout=300)


def test_repro_of_step_0_written_on_request_says_no_crash_and_does_not_reproduce(engine, tmp_path):
    out = engine("write_repro", out_dir=str(tmp_path / "r0"), step=0)
    readme = (Path(out["path"]) / "README.txt").read_text()
    assert "died" not in readme
    assert "step 0" in readme
    run = _run(Path(out["path"]))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "did not reproduce" in run.stdout


def test_repro_of_the_bad_step_after_a_bisect_carries_its_verdict_and_reproduces(engine, tmp_path):
    result = engine("bisect")
    fb = result["first_bad"]
    assert (fb["index"], fb["pass"], fb["stage"]) == (1, "WrongAddToSubtract", "compare")
    out = engine("write_repro", out_dir=str(tmp_path / "r1"), step=1)
    readme = (Path(out["path"]) / "README.txt").read_text()
    assert "died" not in readme
    assert "stage:       compare" in readme and "unchecked" not in readme
    run = _run(Path(out["path"]))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "REPRODUCED" in run.stdout
