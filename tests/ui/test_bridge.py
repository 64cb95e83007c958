"""EngineBridge: requests and signals, crash -> restart + replay, cancel, superseded requests."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import time

import pytest

from irviz.ui.bridge import EngineBridge

SLOW = 300_000  # ms: a cold engine imports torch + TVM on a busy 2-core machine


class Recorder:
    def __init__(self, bridge: EngineBridge):
        self.replies: dict[int, object] = {}
        self.failures: dict[int, dict] = {}
        self.progress: list[tuple[int, str, float]] = []
        self.restarts: list[str] = []
        self.states: list[dict] = []
        self.busy: list[bool] = []
        bridge.replied.connect(lambda i, c, r: self.replies.__setitem__(i, r))
        bridge.failed.connect(lambda i, c, e: self.failures.__setitem__(i, e))
        bridge.progress.connect(lambda i, t, f: self.progress.append((i, t, f)))
        bridge.engineRestarted.connect(self.restarts.append)
        bridge.stateChanged.connect(self.states.append)
        bridge.busyChanged.connect(self.busy.append)

    def done(self, rid):
        return rid in self.replies or rid in self.failures


@pytest.fixture
def bridge(qapp):
    b = EngineBridge()
    yield b
    b.shutdown()


def call(qtbot, bridge, rec, cmd, timeout=SLOW, **args):
    rid = bridge.request(cmd, **args)
    qtbot.waitUntil(lambda: rec.done(rid), timeout=timeout)
    assert rid in rec.replies, rec.failures.get(rid)
    return rec.replies[rid]


def test_request_reply_and_errors_without_torch(qtbot, qapp):
    b = EngineBridge(env={"IRVIZ_ENGINE_NO_PREWARM": "1"})
    try:
        rec = Recorder(b)
        r1 = b.request("ping")
        r2 = b.request("no_such_command")
        r3 = b.request("ping")
        assert r1 < r2 < r3
        qtbot.waitUntil(lambda: rec.done(r3), timeout=30_000)
        assert rec.replies[r1]["pid"] == b.pid
        assert rec.failures[r2]["stage"] == "request"
        assert not b.busy and rec.busy[0] is True and rec.busy[-1] is False
        # the engine dies while idle -> it is restarted, the next request is answered
        pid = b.pid
        with qtbot.waitSignal(b.engineRestarted, timeout=30_000) as sig:
            b.kill_engine()
        assert "crashed" in sig.args[0] and "no model" in sig.args[0]
        assert call(qtbot, b, rec, "ping", timeout=30_000)["pid"] not in (0, pid)
    finally:
        b.shutdown()


def test_crash_command_fails_only_that_request(qtbot, qapp):
    b = EngineBridge(env={"IRVIZ_ENGINE_NO_PREWARM": "1"})
    try:
        rec = Recorder(b)
        r1 = b.request("crash")
        r2 = b.request("ping")          # sent behind the crash: answered by the new engine
        qtbot.waitUntil(lambda: rec.done(r2), timeout=30_000)
        assert rec.failures[r1]["stage"] == "engine"
        assert "signal 11" in rec.failures[r1]["message"] and "`crash`" in rec.failures[r1]["message"]
        assert r2 in rec.replies
        assert rec.restarts and "crashed (signal 11) while running `crash`" in rec.restarts[0]
    finally:
        b.shutdown()


def test_kill_restores_the_same_step_and_ir(qtbot, bridge):
    """Product spec: kill the engine after two steps; the user is back at step 2 with the same IR."""
    rec = Recorder(bridge)
    state = call(qtbot, bridge, rec, "open", spec="sample:mul_add", pipeline="zero")
    assert state["cursor"] == 0 and rec.states[-1] is not None
    call(qtbot, bridge, rec, "step")
    state = call(qtbot, bridge, rec, "step")
    assert state["cursor"] == 2
    text_before = call(qtbot, bridge, rec, "module_text", step=2)["text"]
    funcs_before = state["tir_functions"]
    pid_before = bridge.pid
    assert bridge.recipe["cursor"] == 2 and len(bridge.recipe["applied"]) == 2

    # 1) a crash inside the engine (SIGSEGV, as TVM does); a warm spare engine takes over
    qtbot.waitUntil(lambda: bridge.spare_warm, timeout=SLOW)
    spare_pid = bridge.spare_pid
    t0 = time.perf_counter()
    with qtbot.waitSignal(bridge.engineRestarted, timeout=SLOW) as sig:
        bridge.request("crash")
    restart_s = time.perf_counter() - t0
    reason = sig.args[0]
    assert "crashed (signal 11)" in reason and "replayed to step 2" in reason, reason
    assert bridge.pid == spare_pid != pid_before
    assert rec.states[-1]["cursor"] == 2 and len(rec.states[-1]["steps"]) == 3
    assert rec.states[-1]["tir_functions"] == funcs_before
    assert call(qtbot, bridge, rec, "module_text", step=2)["text"] == text_before
    print(f"crash -> warm spare + replay to step 2: {restart_s:.2f} s")

    # 2) the process is killed from outside (QProcess.kill -> SIGKILL), no spare: a cold start
    bridge._spare_timer.stop()
    if bridge._spare is not None:
        bridge._retire(bridge._spare)
        bridge._spare = None
    t0 = time.perf_counter()
    with qtbot.waitSignal(bridge.engineRestarted, timeout=SLOW) as sig:
        bridge.kill_engine()
    print(f"kill -> cold start + replay to step 2: {time.perf_counter() - t0:.2f} s")
    assert "replayed to step 2" in sig.args[0]
    assert call(qtbot, bridge, rec, "state")["cursor"] == 2
    assert call(qtbot, bridge, rec, "module_text")["text"] == text_before

    # moving back keeps the applied passes: a crash then replays to the earlier cursor
    call(qtbot, bridge, rec, "back")
    with qtbot.waitSignal(bridge.engineRestarted, timeout=SLOW) as sig:
        bridge.request("crash")
    assert "replayed to step 1" in sig.args[0]
    st = call(qtbot, bridge, rec, "state")
    assert st["cursor"] == 1 and len(st["steps"]) == 3


SEGV_PASS = """
import os
import signal

from irviz.core.passes import irviz_pass


@irviz_pass(name="Segfault", description="kills the process, as a TVM bug does")
def segfault(mod):
    os.kill(os.getpid(), signal.SIGSEGV)
    return mod
"""


def test_pass_that_crashes_tvm_names_the_pass_and_replays(qtbot, bridge, tmp_path):
    rec = Recorder(bridge)
    pass_file = tmp_path / "segv_pass.py"
    pass_file.write_text(SEGV_PASS)
    call(qtbot, bridge, rec, "open", spec="sample:mul_add", pipeline="zero")
    names = {p["name"] for p in call(qtbot, bridge, rec, "load_pass_file", path=str(pass_file))}
    assert "Segfault" in names
    call(qtbot, bridge, rec, "set_pipeline",
         passes=[{"name": "LegalizeOps", "params": {}}, {"name": "Segfault", "params": {}}])
    call(qtbot, bridge, rec, "step")
    text1 = call(qtbot, bridge, rec, "module_text", step=1)["text"]
    with qtbot.waitSignal(bridge.engineRestarted, timeout=SLOW) as sig:
        rid = bridge.request("step")
    assert sig.args[0].startswith("The engine crashed (signal 11) while running `step` (Segfault). "
                                  "Restarted and replayed to step 1. Repro folder: ")
    # the new engine wrote the repro of the pass that died: its input, and the pass to apply
    folder = sig.args[0].split("Repro folder: ")[1].split(" (python")[0]
    files = set(os.listdir(folder))
    assert {"before.py", "before.params", "repro.py", "README.txt", "inputs.npz",
            "expected.npz"} <= files and "after.py" not in files
    readme = open(os.path.join(folder, "README.txt")).read()
    assert "died inside pass Segfault" in readme and "LegalizeOps" in readme
    assert "R.add" not in open(os.path.join(folder, "before.py")).read()  # after LegalizeOps
    assert rec.failures[rid]["stage"] == "engine" and "(Segfault)" in rec.failures[rid]["message"]
    st = rec.states[-1]
    assert st["cursor"] == 1 and [p["name"] for p in st["planned"]] == ["Segfault"]
    assert call(qtbot, bridge, rec, "module_text", step=1)["text"] == text1
    assert bridge.recipe["pass_files"] == [str(pass_file)]


def test_cancel_mid_pass_and_mid_build(qtbot, bridge):
    rec = Recorder(bridge)
    call(qtbot, bridge, rec, "open", spec="sample:mul_add", pipeline="zero")
    call(qtbot, bridge, rec, "step")
    text1 = call(qtbot, bridge, rec, "module_text", step=1)["text"]

    # cancel from inside the first progress message of run_to_end: the engine is mid-pass
    cancelled = []

    def on_progress(rid, text, fraction):
        if rid == run_id and not cancelled:
            cancelled.append(bridge.cancel())

    bridge.progress.connect(on_progress)
    try:
        with qtbot.waitSignal(bridge.engineRestarted, timeout=SLOW) as sig:
            run_id = bridge.request("run_to_end")
    finally:
        bridge.progress.disconnect(on_progress)
    assert cancelled == [True]
    assert rec.failures[run_id]["stage"] == "cancelled"
    assert run_id not in rec.replies
    assert "Cancelled `run_to_end`" in sig.args[0] and "replayed to step 1" in sig.args[0]
    st = call(qtbot, bridge, rec, "state")
    assert st["cursor"] == 1 and len(st["steps"]) == 2
    assert call(qtbot, bridge, rec, "module_text", step=1)["text"] == text1

    # cancel a build while it compiles
    build_id = bridge.request("build_run", step=1)
    qtbot.waitUntil(lambda: any(p[0] == build_id for p in rec.progress), timeout=SLOW)
    with qtbot.waitSignal(bridge.engineRestarted, timeout=SLOW):
        assert bridge.cancel() is True
    assert rec.failures[build_id]["stage"] == "cancelled"
    assert not bridge.busy and bridge.cancel() is False  # idle once replayed
    assert call(qtbot, bridge, rec, "state")["cursor"] == 1


def test_newer_request_supersedes_older(qtbot, bridge):
    rec = Recorder(bridge)
    call(qtbot, bridge, rec, "open", spec="sample:mul_add", pipeline="zero")
    call(qtbot, bridge, rec, "step")
    first = bridge.request("relax_graph", step=0)
    second = bridge.request("relax_graph", step=1)
    third = bridge.request("diff", a=0, b=1, supersede=False)
    qtbot.waitUntil(lambda: rec.done(second) and rec.done(third), timeout=SLOW)
    qtbot.wait(200)
    assert first not in rec.replies and first not in rec.failures
    assert rec.replies[second]["nodes"]
    assert rec.replies[third]["functions"]


def test_bad_spec_fails_and_bridge_keeps_working(qtbot, bridge):
    rec = Recorder(bridge)
    rid = bridge.request("open", spec="sample:no_such_sample")
    qtbot.waitUntil(lambda: rec.done(rid), timeout=SLOW)
    assert rec.failures[rid]["stage"] == "load"
    assert call(qtbot, bridge, rec, "list_samples")
    assert not rec.restarts


@pytest.mark.parametrize("program,arguments", [
    ("/nonexistent/python", None),                        # cannot start at all
    (None, ["-c", "import sys; sys.exit(3)"]),            # dies before saying ready, every time
])
def test_engine_that_cannot_start_fails_requests(qtbot, qapp, program, arguments):
    b = EngineBridge(program=program, arguments=arguments, spare=False)
    try:
        rec = Recorder(b)
        rid = b.request("ping")
        qtbot.waitUntil(lambda: rec.done(rid), timeout=30_000)
        assert rec.failures[rid]["stage"] == "engine"
        assert not b.busy
        rid2 = b.request("ping")                         # still answered (asynchronously)
        qtbot.waitUntil(lambda: rec.done(rid2), timeout=5_000)
        assert rec.failures[rid2]["stage"] == "engine"
    finally:
        b.shutdown()


CHAPTER = "sample:course_chapter_passes"


def test_restart_with_no_model_reloads_the_pass_files(qtbot, bridge):
    rec = Recorder(bridge)
    names = {p["name"] for p in call(qtbot, bridge, rec, "load_pass_file", path=CHAPTER)}
    assert "builtin:MatmulAddFuse" in names
    with qtbot.waitSignal(bridge.engineRestarted, timeout=SLOW) as sig:
        bridge.kill_engine()
    assert "no model open" in sig.args[0]
    # the new engine has the file's passes: a pipeline naming them opens
    call(qtbot, bridge, rec, "open", spec=CHAPTER, pipeline="MatmulAddFuse,builtin:LowerToTensorIR")
    st = call(qtbot, bridge, rec, "run_to_end")
    assert [s["pass"] for s in st["steps"]] == ["import", "MatmulAddFuse", "builtin:LowerToTensorIR"]
    listed = {p["name"]: p for p in call(qtbot, bridge, rec, "list_passes")}
    assert listed["MatmulAddFuse"]["source"].endswith("course_chapter_passes.py:107")
