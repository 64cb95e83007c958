"""The engine process (`python -m irviz.engine`) driven as a subprocess over JSON lines."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from irviz.protocol.parts import PartJoiner

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 240.0


class EngineProc:
    """A running engine: `call(cmd, **args)` -> (reply, [progress messages])."""

    def __init__(self, log_path: Path, **env_overrides):
        env = dict(os.environ)
        for k, v in env_overrides.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "irviz.engine"], cwd=str(ROOT), env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, bufsize=1)
        self.lines: queue.Queue = queue.Queue()
        self.raw: list[str] = []
        self.joiner = PartJoiner()
        self.next_id = 1
        threading.Thread(target=self._read, daemon=True).start()
        self.hello = self.next_message()

    def _read(self):
        for line in self.proc.stdout:
            self.raw.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def next_message(self, timeout=TIMEOUT) -> dict:
        """The next message, a big reply put back together from its parts."""
        while True:
            line = self.lines.get(timeout=timeout)
            assert line is not None, "engine closed stdout"
            msg = self.joiner.feed(json.loads(line))  # stdout carries only protocol lines
            if msg is not None:
                return msg

    def send(self, cmd, group=None, **args) -> int:
        return self.send_many([(cmd, group, args)])[0]

    def send_many(self, requests) -> list[int]:
        """[(cmd, group, args)] written in one go; returns their ids."""
        ids, text = [], ""
        for cmd, group, args in requests:
            msg = {"id": self.next_id, "cmd": cmd, "args": args}
            if group is not None:
                msg["group"] = group
            ids.append(self.next_id)
            self.next_id += 1
            text += json.dumps(msg) + "\n"
        self.proc.stdin.write(text)
        self.proc.stdin.flush()
        return ids

    def wait_reply(self, rid, timeout=TIMEOUT):
        progress = []
        deadline = time.monotonic() + timeout
        while True:
            msg = self.next_message(timeout=max(0.1, deadline - time.monotonic()))
            if msg.get("id") != rid:
                raise AssertionError(f"unexpected message while waiting for {rid}: {msg}")
            if "progress" in msg:
                progress.append(msg)
                continue
            return msg, progress

    def call(self, cmd, **args):
        return self.wait_reply(self.send(cmd, **args))

    def ok(self, cmd, **args):
        reply, _ = self.call(cmd, **args)
        assert reply["ok"], reply.get("error")
        return reply["result"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    e = EngineProc(tmp_path_factory.mktemp("engine") / "engine.log")
    yield e
    e.close()


def test_hello_then_catalogues(engine):
    assert engine.hello["event"] == "ready" and engine.hello["pid"] == engine.proc.pid
    names = [s["name"] for s in engine.ok("list_samples")]
    assert {"mlp", "mul_add"} <= set(names)
    pipelines = {p["name"]: p for p in engine.ok("list_pipelines")}
    assert "zero" in pipelines and pipelines["zero"]["passes"]
    passes = engine.ok("list_passes")
    assert all({"name", "description", "category", "params"} <= set(p) for p in passes)


def test_bad_requests_do_not_kill_the_engine(engine):
    reply, _ = engine.call("no_such_command")
    assert not reply["ok"] and reply["error"]["message"]
    reply, _ = engine.call("jump", index=99)          # no model open yet (or no such step)
    assert not reply["ok"]
    engine.proc.stdin.write("this is not json\n")
    engine.proc.stdin.flush()
    bad = engine.next_message()
    assert bad["ok"] is False and bad["error"]["stage"] == "request"
    assert engine.ok("state")["cursor"] == 0


def test_open_bad_spec_is_an_error_reply(engine):
    reply, _ = engine.call("open", spec="sample:no_such_sample")
    assert reply["ok"] is False
    err = reply["error"]
    assert err["stage"] == "load" and "no_such_sample" in err["message"]
    reply, _ = engine.call("open", spec="/nonexistent/model.py")
    assert reply["ok"] is False and reply["error"]["stage"] == "load"
    assert engine.ok("state")["model"] is None        # still answering


def test_open_step_views_diff(engine):
    reply, progress = engine.call("open", spec="sample:mul_add", pipeline="zero")
    assert reply["ok"], reply.get("error")
    state = reply["result"]
    texts = " | ".join(p["progress"] for p in progress)
    assert "Loading" in texts and "Capturing" in texts and "Importing" in texts
    assert all(0.0 <= p["fraction"] <= 1.0 for p in progress if "fraction" in p)
    assert state["model"] == "mul_add" and state["cursor"] == 0 and len(state["steps"]) == 1
    assert state["steps"][0]["index"] == 0
    assert [p["name"] for p in state["planned"]][:1] == ["LegalizeOps"]
    assert "main" in state["relax_functions"]

    text0 = engine.ok("module_text", step=0)["text"]
    assert "def main" in text0

    fx = engine.ok("fx_graph")
    assert len(fx["nodes"]) >= 4 and fx["edges"]
    assert all({"id", "label", "x", "y", "w", "h"} <= set(n) for n in fx["nodes"])
    assert fx["width"] > 0 and fx["height"] > 0

    state = engine.ok("step")
    assert state["cursor"] == 1 and state["steps"][1]["pass"] == "LegalizeOps"
    assert state["steps"][1]["changed"] is True
    assert state["tir_functions"], "LegalizeOps lowers ops to PrimFuncs"
    # IR size per step: the import has no TensorIR, LegalizeOps made the prim_funcs listed
    sizes = [st["size"] for st in state["steps"]]
    assert sizes[0]["prim_funcs"] == 0 and sizes[0]["tir_lines"] == 0 and sizes[0]["bindings"] > 0
    assert sizes[1]["prim_funcs"] == len(state["tir_functions"]) and sizes[1]["tir_lines"] > 0

    rg = engine.ok("relax_graph", step=1, func="main")
    assert rg["nodes"] and rg["edges"]
    assert engine.ok("relax_graph", step=1) is not None      # cached path

    tirs = engine.ok("tir_functions", step=1)
    assert {t["name"] for t in tirs} == set(state["tir_functions"])
    name = state["tir_functions"][0]
    ft = engine.ok("function_text", step=1, name=name)
    assert ft["name"] == name and name in ft["text"]
    reply, _ = engine.call("function_text", step=1, name="no_such_function")
    assert reply["ok"] is False

    d = engine.ok("diff", a=0, b=1)
    assert d["unified"]
    statuses = {f["name"]: f["status"] for f in d["functions"]}
    assert statuses.get("main") == "changed"
    assert all(s in ("added", "removed", "changed") for s in statuses.values())
    assert all(len(row) == 7 for f in d["functions"] for row in f["rows"])

    prov = engine.ok("provenance", step=1)
    assert set(prov) == {"fx_to_relax", "relax_to_callee"}
    assert prov["relax_to_callee"], "main calls the legalized PrimFuncs"

    state = engine.ok("back")
    assert state["cursor"] == 0
    state = engine.ok("jump", index=1)
    assert state["cursor"] == 1
    reply, _ = engine.call("jump", index=42)
    assert reply["ok"] is False and engine.ok("state")["cursor"] == 1


def test_run_to_end_reports_progress_per_pass(engine):
    before = engine.ok("state")
    remaining = len(before["planned"])
    assert remaining >= 2
    reply, progress = engine.call("run_to_end")
    assert reply["ok"], reply.get("error")
    state = reply["result"]
    assert state["planned"] == [] and state["cursor"] == len(state["steps"]) - 1
    applying = [p for p in progress if p["progress"].startswith("Applying")]
    assert len(applying) == remaining
    fractions = [p["fraction"] for p in applying]
    assert fractions == sorted(fractions)


def test_build_run_compares_with_torch(engine):
    state = engine.ok("state")
    res = engine.ok("build_run", step=state["cursor"])
    assert res["allclose"] is True and res["ok"] is True
    assert res["max_abs_error"] < 1e-4
    assert res["tvm_ms"] > 0 and res["torch_ms"] > 0 and res["build_seconds"] > 0
    assert isinstance(res["kernels"], list)
    # whether the figures can be trusted travels with them, with the reason when they cannot
    assert isinstance(res["reliable"], bool) and (res["reliable"] or res["reason"])
    # the roofline per kernel travels with the run, one entry per timed kernel
    roof = res["roofline"]
    assert roof["peak_gflops"] > 0 and roof["bandwidth_gbs"] > 0
    assert [e["name"] for e in roof["kernels"]] == [k["name"] for k in res["kernels"]]
    for e in roof["kernels"]:
        assert e["gflops"] == pytest.approx(e["flops"] / e["ms"] / 1e6, rel=1e-4)


def test_unknown_pass_is_a_pipeline_error(engine):
    reply, _ = engine.call("set_pipeline", passes=[{"name": "NoSuchPass", "params": {}}])
    assert reply["ok"] is False and reply["error"]["stage"] == "pipeline"
    assert engine.ok("state")["model"] == "mul_add"


def test_replay_rebuilds_the_same_ir(engine):
    state = engine.ok("state")
    applied = [{"name": s["pass"], "params": s["params"]} for s in state["steps"][1:]]
    engine.ok("jump", index=2)
    text2 = engine.ok("module_text", step=2)["text"]
    reply, progress = engine.call("replay", spec="sample:mul_add", importer="exported_program",
                                  applied=applied[:3], planned=applied[3:], cursor=2)
    assert reply["ok"], reply.get("error")
    st = reply["result"]
    assert st["cursor"] == 2 and len(st["steps"]) == 4
    assert [p["name"] for p in st["planned"]] == [a["name"] for a in applied[3:]]
    assert engine.ok("module_text", step=2)["text"] == text2
    assert any(p["progress"].startswith("Applying") for p in progress)


def test_newer_request_of_a_group_supersedes_a_waiting_one(engine):
    # three lines in one write: while the first (a fresh layout) runs, both grouped requests wait
    # in the engine's queue, so the older one is skipped without running.
    a, b, c = engine.send_many([("relax_graph", None, {"step": 0}),
                                ("relax_graph", "relax", {"step": 0}),
                                ("relax_graph", "relax", {"step": 1})])
    ra, _ = engine.wait_reply(a)
    rb, _ = engine.wait_reply(b)
    rc, _ = engine.wait_reply(c)
    assert ra["ok"] and rc["ok"]
    assert rb["ok"] is False and rb["error"]["stage"] == "superseded"


def test_failing_pass_reply_carries_state(engine, tmp_path):
    f = tmp_path / "boom_pass.py"
    # stray output, from Python and straight to fd 1 as C code would: must not reach the protocol
    f.write_text("import os\nfrom irviz.core.passes import irviz_pass\n\n"
                 "print('stray print from a pass file')\nos.write(1, b'stray fd 1 write\\n')\n\n\n"
                 "@irviz_pass(name='Boom')\ndef boom(mod):\n    print('boom prints')\n"
                 "    raise ValueError('kaboom')\n")
    assert "Boom" in {p["name"] for p in engine.ok("load_pass_file", path=str(f))}
    before = engine.ok("state")
    engine.ok("set_pipeline", passes=[{"name": "Boom", "params": {}}])
    reply, _ = engine.call("step")
    assert reply["ok"] is False
    assert reply["error"]["stage"] == "pipeline" and "kaboom" in reply["error"]["message"]
    st = reply["state"]
    assert st["cursor"] == before["cursor"] and st["error"]["message"] == reply["error"]["message"]
    assert [p["name"] for p in st["planned"]] == ["Boom"]
    st = engine.ok("set_pipeline", pipeline="zero")
    assert st["error"] is None
    reply, _ = engine.call("load_pass_file", path=str(tmp_path / "missing.py"))
    assert reply["ok"] is False and reply["error"]["stage"] == "pipeline"


def test_fx_graph_folds_by_module_when_big(monkeypatch):
    """In-process: with the threshold lowered, fx_graph folds module groups by default."""
    import irviz.engine as engine_mod
    from irviz.engine import views as step_views

    sent = []
    monkeypatch.setattr(step_views, "FX_FOLD_THRESHOLD", 6)
    e = engine_mod.Engine(type("C", (), {"send": lambda self, m: sent.append(m)})())
    assert e.handle({"id": 1, "cmd": "open", "args": {"spec": "sample:small_cnn"}})["ok"]
    full = e.handle({"id": 2, "cmd": "fx_graph", "args": {"fold_depth": None}})["result"]
    auto = e.handle({"id": 3, "cmd": "fx_graph", "args": {}})["result"]
    assert full["fold_depth"] is None and len(full["nodes"]) == full["total_nodes"]
    assert auto["fold_depth"] is not None and len(auto["nodes"]) < len(full["nodes"])
    assert any(n["id"].startswith("group:") for n in auto["nodes"])
    assert any(m.get("progress", "").startswith("Laying out") for m in sent)
    json_text = __import__("json").dumps(auto)      # plain data all the way down
    assert json_text


def test_export(engine, tmp_path):
    last = len(engine.ok("state")["steps"]) - 1
    engine.ok("build_run", step=last, repeats=2)        # its numbers go into the report
    res = engine.ok("export", out_dir=str(tmp_path / "trace"))
    assert res["files"] and Path(res["path"]).exists()
    assert any(f.endswith("report.html") for f in res["files"])
    assert any(f.endswith("steps.json") for f in res["files"])


def test_stdout_carries_only_protocol_lines(engine):
    for line in engine.raw:
        msg = json.loads(line)
        assert "id" in msg or "event" in msg
    engine.log.flush()
    log = Path(engine.log.name).read_text()
    assert "stray print from a pass file" in log and "stray fd 1 write" in log and "boom prints" in log


def test_crash_command_kills_the_engine(tmp_path):
    e = EngineProc(tmp_path / "crash.log")
    try:
        e.send("crash")
        assert e.proc.wait(30) == -signal.SIGSEGV
    finally:
        e.close()


def test_a_users_engine_answers_crash_as_an_unknown_command(tmp_path):
    e = EngineProc(tmp_path / "no-crash.log", IRVIZ_TEST_COMMANDS=None, IRVIZ_ENGINE_NO_PREWARM="1")
    try:
        reply, _ = e.call("crash")
        assert reply["ok"] is False and reply["error"]["stage"] == "request"
        assert "Unknown command 'crash'" in reply["error"]["message"]
        assert e.ok("ping")["pid"] == e.proc.pid
    finally:
        e.close()


def test_engine_opens_an_exported_step_and_runs_it_without_a_reference(tmp_path):
    """An exported TVMScript step opens like a model: Relax/TIR views, stepping, build and run."""
    from irviz.core.frontend.capture import capture
    from irviz.core.export.step_files import is_exported_step
    from irviz.core.export.trace import export_trace
    from irviz.core.frontend.importer import import_model
    from irviz.core.frontend.model_file import load_model
    from irviz.core.passes import get_pipeline
    from irviz.core.session import Session
    from irviz.engine import Engine

    captured = capture(load_model("sample:mlp"))
    session = Session(import_model(captured), captured)
    session.set_pipeline(get_pipeline("zero")[:2])
    session.run_to_end()
    out = export_trace(session, tmp_path / "trace")
    step_file = sorted(out.glob("step_02_*.py"))[0]
    assert is_exported_step(step_file) and not is_exported_step(__file__)

    eng = Engine(type("C", (), {"send": lambda self, m: None})())
    state = eng.handle({"id": 1, "cmd": "open", "args": {"spec": str(step_file), "pipeline": "zero"}})
    assert state["ok"], state
    assert state["result"]["importer"] == "tvmscript"
    assert state["result"]["model"] == step_file.stem
    text = eng.handle({"id": 2, "cmd": "module_text", "args": {"step": 0}})["result"]["text"]
    assert "R.call_tir" in text  # the step was after LegalizeOps
    fx = eng.handle({"id": 3, "cmd": "fx_graph", "args": {}})
    assert not fx["ok"] and "no FX graph" in fx["error"]["message"]
    assert eng.handle({"id": 4, "cmd": "run_to_end", "args": {}})["ok"]
    run = eng.handle({"id": 5, "cmd": "build_run", "args": {"repeats": 2}})
    assert run["ok"], run
    r = run["result"]
    assert r["reference"] is False and r["allclose"] is None and r["tvm_ms"] > 0
    assert r["kernels"] and all(k["ms"] >= 0 for k in r["kernels"])
