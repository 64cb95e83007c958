"""The Workspace chains load → capture → import → passes → build → run for the engine and the CLI."""
from __future__ import annotations

import pytest

pytest.importorskip("tvm")

from irviz.core.errors import IrvizError, PassError, RequestError
from irviz.core.passes import PassInvocation, get_pipeline
from irviz.core.workspace import Workspace


def _recording():
    progress, log = [], []
    ws = Workspace(progress=lambda text, fraction=None, pass_name=None:
                   progress.append((text, fraction, pass_name)), log=log.append)
    return ws, progress, log


def test_open_run_build_and_export(tmp_path):
    ws, progress, log = _recording()
    ws.open("sample:mul_add", planned=get_pipeline("zero"))
    n = len(ws.planned())
    assert ws.session.cursor == 0 and n > 2 and ws.model_name == "mul_add"
    assert [line.split()[0] for line in log] == ["load", "capture", "import"]
    progress.clear()
    ws.run_to_end()
    applied = [p for p in progress if p[2] is not None]
    assert [p[2] for p in applied] == [st.pass_name for st in ws.session.steps[1:]]
    assert [p[0] for p in applied][:1] == [f"Applying {applied[0][2]} (1/{n})"]
    assert [p[1] for p in applied] == sorted(p[1] for p in applied) and applied[-1][1] < 1
    assert len(log) == 3 + n
    built, res = ws.build_run()
    assert res.allclose and ws.current_runs() == {ws.session.cursor: res}
    again, _ = ws.build_run(repeats=1)
    assert again is built   # the same step is not built twice
    out = ws.export(tmp_path / "trace")
    assert (out / "report.html").exists() and (out / "steps.json").exists()


def test_a_failing_pass_raises_and_leaves_the_session_on_the_last_good_step():
    import tvm

    from irviz.core.passes import registry

    @tvm.ir.transform.module_pass(opt_level=0, name="Boom")
    def boom(mod, ctx):
        raise ValueError("boom")

    registry.register_pass(registry.PassSpec(name="BoomForWorkspaceTest", description="fails",
                                             params=[], make=lambda: boom, category="user"),
                           replace=True)
    try:
        ws, progress, _ = _recording()
        ws.open("sample:mul_add", planned=[PassInvocation("LegalizeOps", {}),
                                           PassInvocation("BoomForWorkspaceTest", {})])
        with pytest.raises(PassError):
            ws.run_to_end()
        assert ws.session.cursor == 1 and ws.planned()[0].name == "BoomForWorkspaceTest"
        assert progress[-1][2] == "BoomForWorkspaceTest"
    finally:
        registry.unregister_pass("BoomForWorkspaceTest")


def test_a_failed_open_keeps_the_model_that_was_open():
    ws, _, _ = _recording()
    ws.open("sample:mul_add")
    session = ws.session
    with pytest.raises(IrvizError) as info:
        ws.open("sample:no_such_sample")
    assert info.value.stage == "load" and ws.stage == "load"
    assert ws.session is session and ws.spec == "sample:mul_add"


def test_a_failed_import_keeps_the_capture_and_the_plan():
    ws, _, _ = _recording()
    ws.open("sample:mul_add")
    with pytest.raises(IrvizError) as info:
        ws.open("sample:unsupported_op", planned=get_pipeline("zero"))
    assert info.value.stage == "import"
    assert ws.session is None and ws.captured is not None and ws.import_error is info.value
    assert [i.name for i in ws.planned()] == [i.name for i in get_pipeline("zero")]
    with pytest.raises(RequestError):
        ws.step_at(0)


def test_jump_past_the_end_is_a_request_error():
    ws, _, _ = _recording()
    ws.open("sample:mul_add", planned=get_pipeline("zero")[:2])
    with pytest.raises(RequestError, match="2 more planned"):
        ws.jump(5)
    ws.jump(2)
    assert ws.session.cursor == 2 and not ws.planned()
