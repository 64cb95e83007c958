"""The CLI with pass files of TVM's own kinds: the course chapter's passes as written (the
course_chapter_passes sample is also a pass file), compare with the user's pipeline in either
place, `irviz passes --passes`, and a pass that raises."""
import json
import textwrap

import pytest

from irviz.cli.main import main
from irviz.core import passes as P

CHAPTER = "sample:course_chapter_passes"
CHAPTER_PIPELINE = "MatmulAddFuse,LowerToTensorIR,FuseTIR"


@pytest.fixture(autouse=True)
def user_passes():
    """The commands run in this process: the pass files' passes must not outlive the test (they
    take built-in names)."""
    before = {id(s) for s in P.list_passes()}
    yield
    for s in P.list_passes():
        if s.category == "user" and id(s) not in before:
            P.unregister_pass(s.name)


def test_the_chapters_passes_run_as_written(capsys):
    code = main(["check", CHAPTER, "--passes", CHAPTER, "--pipeline", CHAPTER_PIPELINE,
                 "--json", "-", "--repeats", "1"])
    out = capsys.readouterr()
    summary = json.loads(out.out)
    assert code == 0 and summary["ok"], summary["error"]
    assert [(s["pass"], s["changed"]) for s in summary["steps"]] == [
        ("MatmulAddFuse", True), ("LowerToTensorIR", True), ("FuseTIR", True)]
    assert summary["allclose"] is True and summary["reference"] == "reference()"
    assert "the built-in course pass is now builtin:MatmulAddFuse" in out.err


@pytest.mark.parametrize("user_first", [True, False])
def test_compare_with_the_users_pipeline_in_either_place(tmp_path, capsys, user_first):
    builtins = "builtin:MatmulAddFuse,builtin:LowerToTensorIR,FuseTIR"
    a, b = (CHAPTER_PIPELINE, builtins) if user_first else (builtins, CHAPTER_PIPELINE)
    out = tmp_path / "cmp"
    code = main(["compare", CHAPTER, "--passes", CHAPTER, "--pipeline", a, "--pipeline", b,
                 "--out", str(out), "--no-build"])
    assert code == 0, capsys.readouterr().err
    data = json.loads((out / "compare.json").read_text())
    steps = [row["steps"] for row in data["pipelines"]]
    user_steps = ["import", "MatmulAddFuse", "LowerToTensorIR", "FuseTIR"]
    builtin_steps = ["import", "builtin:MatmulAddFuse", "builtin:LowerToTensorIR", "FuseTIR"]
    assert steps == ([user_steps, builtin_steps] if user_first else [builtin_steps, user_steps])


def test_compare_names_an_unknown_pass_in_b_before_loading_the_model(tmp_path, capsys):
    code = main(["compare", CHAPTER, "--passes", CHAPTER, "--pipeline", "zero",
                 "--pipeline", "MatmulAddFuse,Nope", "--out", str(tmp_path)])
    assert code == 1
    err = capsys.readouterr().err
    assert "unknown pass 'Nope'" in err and "load " not in err


def test_passes_lists_whose_each_pass_is(capsys):
    assert main(["passes", "--passes", CHAPTER]) == 0
    rows = dict(line.split("\t", 1) for line in capsys.readouterr().out.splitlines())
    assert rows["MatmulAddFuse"].startswith("[user: ") and "course_chapter_passes.py:107]" in rows["MatmulAddFuse"]
    assert rows["builtin:MatmulAddFuse"].startswith("[course]")
    assert rows["FuseTIR"].startswith("[tvm]")
    assert main(["passes", "--passes", "no_such_passes.py"]) == 2
    assert "pass file not found" in capsys.readouterr().err


def test_a_raising_pass_stops_check_naming_the_pass_and_line_and_keeps_the_steps_before(tmp_path, capsys):
    path = tmp_path / "boom.py"
    path.write_text(textwrap.dedent('''\
        import tvm

        @tvm.ir.transform.module_pass(opt_level=0, name="Boom")
        class Boom:
            def transform_module(self, mod, ctx):
                raise ValueError("the pass gave up")
        '''))
    code = main(["check", "sample:mul_add", "--passes", str(path), "--pipeline", "LegalizeOps,Boom,FuseTIR",
                 "--json", "-", "--repeats", "1"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 1 and summary["failed_stage"] == "pipeline"
    assert f"Boom failed at {path}:6" in summary["error"] and "the pass gave up" in summary["error"]
    assert [s["pass"] for s in summary["steps"]] == ["LegalizeOps"]
    assert summary["pipeline_text"] == "LegalizeOps,Boom,FuseTIR"
