"""An IR file's schedule(sch), one step per primitive: the course's mm_relu schedule stepped with
its diffs and lines, the pipeline after it, the learner's functions left to them by irviz's CPU
rules, a failing primitive (its line named, the steps before it kept), the course's get_block
name, a returned trace, and schedule_trace.py replaying in plain TVM."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("tvm")

from irviz.core.frontend.sample_files import sample_path
from irviz.core.tvm_compat import structural_equal
from irviz.core.workspace import Workspace

SAMPLE = sample_path("course_schedule_steps")
SOURCE = SAMPLE.read_text(encoding="utf-8")
PRIMITIVES = ["split", "reorder", "reverse_compute_at", "parallel", "vectorize", "decompose_reduction"]


def line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def variant(tmp_path, name: str, old: str, new: str):
    assert old in SOURCE
    path = tmp_path / f"{name}.py"
    path.write_text(SOURCE.replace(old, new), encoding="utf-8")
    return path


def opened(spec, pipeline=()) -> Workspace:
    ws = Workspace()
    ws.open(str(spec), planned=list(pipeline))
    return ws


def test_each_primitive_is_a_step_with_its_diff_and_line():
    ws = opened(SAMPLE, ["LegalizeOps", "FuseOps"])
    s = ws.session
    steps = s.steps[1:1 + len(PRIMITIVES)]
    assert [st.pass_name for st in steps] == PRIMITIVES
    assert all(st.origin == "schedule" and st.changed and st.changed_what == "ir" for st in steps)
    assert s.n_schedule == len(PRIMITIVES) and s.cursor == 0 and s.schedule_error is None
    # each step is one primitive: its line in the file, and a diff that shows that primitive
    for st, call in zip(steps, ["sch.split(", "sch.reorder(", "sch.reverse_compute_at(", "sch.parallel(",
                                "sch.vectorize(", "sch.decompose_reduction("]):
        assert st.params["line"] == line_of(SOURCE, call)
        assert call in st.params["code"] and st.params["trace"].lstrip("b0123456789l, =").startswith(call)
        assert st.changes.changed == ["mm_relu"]
    diffs = [s.diff(k - 1, k)[0] for k in range(1, len(PRIMITIVES) + 1)]
    assert "+    for i, j_0, j_1, k in T.grid(128, 32, 4, 128):" in diffs[0]
    assert "+            vj = T.axis.spatial(128, j_0 * 4 + j_1)" in diffs[0]
    assert "-    for i, j_0, j_1, k in T.grid(128, 32, 4, 128):" in diffs[1]
    assert "+    for i, j_0, k, j_1 in T.grid(128, 32, 128, 4):" in diffs[1]
    assert "+                vj = T.axis.spatial(128, j_0 * 4 + ax0)" in diffs[2]
    assert "+    for i in T.parallel(128):" in diffs[3] and "T.parallel" not in diffs[2]
    assert "+            for ax0 in T.vectorized(4):" in diffs[4] and "T.vectorized" not in diffs[3]
    assert '+                with T.sblock("Y_init"):' in diffs[5] and '"Y_init"' not in diffs[4]
    # the last step is the learner's own result
    from tvm import s_tir

    ns = {}
    exec(SOURCE[SOURCE.index("def schedule(sch):"):SOURCE.index("\n\n\n_rng")], ns)
    mine = s_tir.Schedule(s.steps[0].mod)
    ns["schedule"](mine)
    assert structural_equal(mine.mod, steps[-1].mod)
    # the pipeline comes after: the schedule steps are not passes
    assert [i.name for i in s.full_pipeline()] == ["LegalizeOps", "FuseOps"]
    ws.run_to_end()
    assert [st.pass_name for st in s.steps[1 + len(PRIMITIVES):]] == ["LegalizeOps", "FuseOps"]
    assert [i.name for i in ws.applied()] == ["LegalizeOps", "FuseOps"]
    # a new pipeline from step 0 keeps the learner's steps
    s.jump(0)
    s.set_pipeline(["FoldConstant"])
    assert [st.pass_name for st in s.steps[1:]] == PRIMITIVES
    assert [i.name for i in s.pipeline] == ["FoldConstant"]
    _, res = ws.build_run(repeats=1)
    assert res.allclose is True


def test_irviz_rules_leave_the_learners_function_to_them(tmp_path):
    # a reorder alone leaves serial loops bound to plain variables: only the session knows it is theirs
    path = variant(tmp_path, "reorder_only", SOURCE[SOURCE.index("def schedule(sch):"):SOURCE.index("\n\n\n_rng")],
                   'def schedule(sch):\n    block_Y = sch.get_sblock("Y", func_name="mm_relu")\n'
                   "    i, j, k = sch.get_loops(block_Y)\n    sch.reorder(i, k, j)")
    ws = opened(path, ["CPUTileReductions", "CPUParallelVectorize"])
    assert [st.pass_name for st in ws.session.steps[1:]] == ["reorder"]
    ws.run_to_end()
    scheduled = ws.session.steps[1].mod["mm_relu"]
    after = ws.session.steps[-1].mod["mm_relu"]
    from irviz.core.schedules.rules import NOTES_ATTR
    from irviz.core.views.module_diff import _without_attrs

    assert structural_equal(_without_attrs(after), _without_attrs(scheduled))
    notes = {str(k): str(v) for k, v in after.attrs[NOTES_ATTR].items()}
    assert set(notes) == {"CPUTileReductions", "CPUParallelVectorize"}
    assert all("already scheduled by its author (schedule() in" in v and "reorder" in v for v in notes.values())
    assert "irviz.scheduled" not in after.attrs
    # without the schedule, the same rule does schedule it
    plain = opened(variant(tmp_path, "unscheduled", "def schedule(sch):", "def _not_a_schedule(sch):"),
                   ["CPUTileReductions"])
    plain.run_to_end()
    assert "irviz.scheduled" in plain.session.steps[-1].mod["mm_relu"].attrs


def test_a_failing_primitive_names_its_line_and_keeps_the_steps_before_it(tmp_path):
    bad = 'block_C = sch.get_sblock("Z", "mm_relu")'
    path = variant(tmp_path, "bad_block", 'block_C = sch.get_sblock("C", "mm_relu")', bad)
    ws = opened(path, ["LegalizeOps"])
    s = ws.session
    assert [st.pass_name for st in s.steps[1:]] == ["split", "reorder"]
    err = s.schedule_error
    assert err is not None and s.error is err and s.cursor == 2
    assert f"bad_block.py:{line_of(path.read_text(), bad)}" in err.message and bad in err.message
    assert "Cannot find a block with the name: Z" in err.message
    # no pass runs on a schedule that stopped half-way; the steps stay viewable
    with pytest.raises(type(err)) as exc:
        ws.step()
    assert exc.value is err and len(s.steps) == 3
    ws.jump(1)
    assert s.current.pass_name == "split"


def test_the_courses_get_block_says_what_to_write(tmp_path):
    path = variant(tmp_path, "course_name", 'sch.get_sblock("Y", func_name="mm_relu")',
                   'sch.get_block("Y", func_name="mm_relu")')
    s = opened(path).session
    assert len(s.steps) == 1
    err = s.schedule_error
    assert "'Schedule' object has no attribute 'get_block'" in err.message
    assert f"course_name.py:{line_of(path.read_text(), 'sch.get_block(')}" in err.message
    assert "sch.get_sblock" in err.hint and "TVM 0.27" in err.hint


def test_a_returned_trace_is_stepped(tmp_path):
    body = ("def schedule(sch):\n    from tvm import s_tir\n\n"
            "    other = s_tir.Schedule(sch.mod)\n"
            '    i, j, k = other.get_loops(other.get_sblock("Y", func_name="mm_relu"))\n'
            "    other.split(j, factors=[None, 8])\n    other.unroll(k)\n    return other.trace")
    old = SOURCE[SOURCE.index("def schedule(sch):"):SOURCE.index("\n\n\n_rng")]
    s = opened(variant(tmp_path, "returns_trace", old, body)).session
    assert [st.pass_name for st in s.steps[1:]] == ["split", "unroll"]
    assert "line" not in s.steps[1].params and "factors=[None, 8]" in s.steps[1].params["trace"]
    assert "T.unroll(128)" in s.diff(1, 2)[0]


def test_export_writes_a_trace_that_replays_in_plain_tvm(tmp_path):
    ws = opened(SAMPLE, ["LegalizeOps"])
    ws.run_to_end()
    out = ws.export(tmp_path / "out")
    summary = json.loads((out / "steps.json").read_text())
    assert summary["schedule_trace"] == {"file": "schedule_trace.py", "primitives": PRIMITIVES,
                                         "verified": True, "note": None}
    assert [(r["pass"], r["origin"]) for r in summary["steps"][:2]] == [("import", "import"), ("split", "schedule")]
    # plain Python and TVM, no irviz: it replays to the module of the last schedule step
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = ("import runpy, sys\nruns = runpy.run_path('schedule_trace.py', run_name='__main__')\n"
            "assert not [m for m in sys.modules if m.startswith('irviz')]\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=out, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "T.parallel(128)" in done.stdout and "T.vectorized(4)" in done.stdout and '"Y_init"' in done.stdout
    # and irviz opens it with the same steps
    again = opened(out / "schedule_trace.py").session
    assert [st.pass_name for st in again.steps[1:]] == PRIMITIVES
    assert structural_equal(again.steps[-1].mod, ws.session.steps[len(PRIMITIVES)].mod)


def test_replay_rebuilds_the_schedule_then_the_passes():
    # how the app recovers from a crashed engine: the recipe names only the passes
    ws = Workspace()
    ws.replay(str(SAMPLE), applied=["LegalizeOps"], planned=["FuseOps"], cursor=7)
    s = ws.session
    assert [st.pass_name for st in s.steps[1:]] == PRIMITIVES + ["LegalizeOps"]
    assert s.cursor == 7 and [i.name for i in s.pipeline] == ["FuseOps"]
    assert [i.name for i in ws.applied()] == ["LegalizeOps"]
    # measuring afresh applies the same passes after the same schedule steps
    ws.remeasure()
    assert [st.pass_name for st in ws.session.steps[1:]] == PRIMITIVES + ["LegalizeOps"]
    assert [i.name for i in ws.session.pipeline] == ["FuseOps"]


def test_lines_in_a_loop_and_in_a_helper(tmp_path):
    body = ('def _unroll_last(sch, block):\n    sch.unroll(sch.get_loops(block)[-1])\n\n\n'
            'def schedule(sch):\n    block_Y = sch.get_sblock("Y", func_name="mm_relu")\n'
            "    i, j, k = sch.get_loops(block_Y)\n    for loop in (i, j):\n"
            "        sch.split(loop, factors=[None, 4])\n    _unroll_last(sch, block_Y)")
    old = SOURCE[SOURCE.index("def schedule(sch):"):SOURCE.index("\n\n\n_rng")]
    path = variant(tmp_path, "loop_helper", old, body)
    text = path.read_text()
    steps = opened(path).session.steps[1:]
    assert [st.pass_name for st in steps] == ["split", "split", "unroll"]
    split_line = line_of(text, "sch.split(loop")
    assert [st.params["line"] for st in steps] == [split_line, split_line, line_of(text, "sch.unroll(")]
    assert "factors=[None, 4]" in steps[1].params["trace"]
    assert "T.unroll(128)" in steps[2].mod["mm_relu"].script()


def test_a_module_of_one_primfunc_needs_no_func_name(tmp_path):
    # the course's get_block("Y") looked in the one function; TVM 0.27 needs work_on, which irviz does
    only = SOURCE[:SOURCE.index("    @R.function")].rstrip() + "\n\n\n" + SOURCE[SOURCE.index("def schedule(sch):"):]
    path = tmp_path / "only_prim.py"
    path.write_text(only.replace('sch.get_sblock("Y", func_name="mm_relu")', 'sch.get_sblock("Y")'))
    s = opened(path).session
    assert s.schedule_error is None and [st.pass_name for st in s.steps[1:]] == PRIMITIVES
    assert 'func_name="mm_relu"' in s.schedule.trace_python()
    assert structural_equal(s.steps[-1].mod["mm_relu"], opened(SAMPLE).session.steps[-1].mod["mm_relu"])
