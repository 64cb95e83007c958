"""Each course sample passes `irviz check`, compared with its reference() (IR files) or with torch
(course_fx_mlp); all of them in one test, so the one-time costs are paid once."""
import json

from irviz.cli import main
from irviz.core.frontend.samples import is_ir_sample, list_samples

COURSE = ["course_te", "course_emit_te", "course_mymodule", "course_extern", "course_mixture",
          "course_bind_params", "course_fx_mlp", "course_chapter_passes"]


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
