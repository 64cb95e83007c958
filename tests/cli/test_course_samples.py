"""Each course sample passes `irviz check`, compared with its reference() (IR files) or with torch
(course_fx_mlp); all of them in one test, so the one-time costs are paid once."""
import json

from irviz.cli.main import main
from irviz.core.frontend.sample_files import is_ir_sample, list_samples
from irviz.core.passes.named_pipelines import CPU_PRE_STEPS

COURSE = ["course_te", "course_emit_te", "course_mymodule", "course_extern", "course_mixture",
          "course_bind_params", "course_bind_params_mixture", "course_primfunc_only", "course_fx_mlp",
          "course_chapter_passes", "course_schedule_steps"]


def test_every_course_sample_passes_check(capsys):
    listed = [n for n, _ in list_samples()]
    assert set(COURSE) <= set(listed)
    failures = {}
    for name in COURSE:
        code = main(["check", f"sample:{name}", "--json", "-", "--repeats", "1"])
        out = capsys.readouterr()
        summary = json.loads(out.out)
        if code != 0 or not summary["ok"]:
            failures[name] = summary["error"]
            continue
        assert summary["allclose"] is True and summary["max_abs_error"] < 1e-3, name
        if is_ir_sample(name):
            assert summary["reference"] == "reference()", (name, summary["reference"])
        else:
            assert summary["reference"] == "torch"
            assert (summary["capture"], summary["importer"]) == ("symbolic_trace", "course")
    assert not failures, failures


def test_the_bind_params_and_primfunc_samples_pass_with_their_pipelines(capsys):
    """BindParams in a step of its own on MyModuleMixture; the PrimFunc scheduled by tir-cpu."""
    for name, pipeline, first in (("course_bind_params_mixture", "BindParams,zero", "BindParams"),
                                  ("course_primfunc_only", "tir-cpu", CPU_PRE_STEPS[0])):
        code = main(["check", f"sample:{name}", "--pipeline", pipeline, "--json", "-", "--repeats", "1"])
        summary = json.loads(capsys.readouterr().out)
        assert code == 0 and summary["allclose"] is True, (name, summary["error"])
        assert summary["steps"][0]["pass"] == first
        assert any(s["changed"] for s in summary["steps"]), name


def test_every_step_of_the_bind_params_mixture_sample_matches_its_reference():
    from irviz.core.backend.step_bisect import check_module, reference_for
    from irviz.core.passes import parse_pipeline
    from irviz.core.workspace import Workspace

    ws = Workspace()
    ws.open("sample:course_bind_params_mixture", planned=parse_pipeline("BindParams,zero"))
    ws.run_to_end()
    ref = reference_for(ws)
    checks = [check_module(st.mod, ref, index=st.index, pass_name=st.pass_name) for st in ws.session.steps]
    assert [c.pass_name for c in checks if not c.ok] == []
    assert [len(st.mod["main"].params) for st in ws.session.steps[:2]] == [5, 1]
