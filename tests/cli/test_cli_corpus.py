"""`irviz corpus` on 2 local Ray workers: a model that crashes its engine, one that hangs and one
with bad input each cost only their row; a rerun resumes; Ctrl-C keeps the rows that finished."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from irviz.core.corpus.isolate import Outcome
from irviz.core.corpus.rows import classify

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 75  # a check of a tiny MLP takes 20-40 s on 2 busy cores; the hang costs this much

# each model appends its process id to NAME.ran when its get_model() runs: the rows that ran
_MARK = """
import os
from pathlib import Path

def _mark():
    with open(Path(__file__).with_suffix(".ran"), "a") as f:
        f.write(f"{os.getpid()}\\n")
"""

MODELS = {
    "hang.py": """
        import time

        def get_model():
            _mark()
            time.sleep(3600)
    """,
    "tiny_mlp.py": """
        import torch

        def get_model():
            _mark()
            torch.manual_seed(0)
            m = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 3))
            return m.eval(), (torch.randn(3, 6),)
    """,
    "segfault.py": """
        import signal

        def get_model():
            _mark()
            os.kill(os.getpid(), signal.SIGSEGV)
    """,
    "bad_inputs.py": """
        import torch

        def get_model():
            _mark()
            return torch.nn.Linear(5, 5), torch.randn(2, 5)  # a tensor, not a tuple of them
    """,
}


def _write(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(_MARK + textwrap.dedent(body), encoding="utf-8")
    return path


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def _corpus_cmd(folder: Path, names, *extra):
    return [sys.executable, "-m", "irviz", "corpus", *names, "--workers", "2", "--timeout", str(TIMEOUT),
            "--json", str(folder / "corpus.json"), *extra]


def _rows(folder: Path) -> dict:
    return {Path(r["model"]).name: r for r in json.loads((folder / "corpus.json").read_text())["models"]}


def _ran(folder: Path) -> set:
    return {p.with_suffix(".py").name for p in folder.glob("*.ran")}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    pytest.importorskip("ray", reason="pip install 'irviz[corpus]'")
    folder = tmp_path_factory.mktemp("corpus")
    for name, body in MODELS.items():
        _write(folder, name, body)
    t0 = time.monotonic()
    proc = subprocess.run(_corpus_cmd(folder, list(MODELS), "--html", str(folder / "corpus.html")),
                          cwd=folder, env=_env(), capture_output=True, text=True, timeout=600)
    return folder, proc, time.monotonic() - t0


def test_each_failure_costs_only_its_row(first_run):
    folder, proc, seconds = first_run
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a crash and a timeout: a script may stop on it
    rows = _rows(folder)
    assert set(rows) == set(MODELS)
    assert {k: r["result"] for k, r in rows.items()} == {
        "tiny_mlp.py": "ok", "segfault.py": "crash", "hang.py": "timeout", "bad_inputs.py": "graceful"}
    ok = rows["tiny_mlp.py"]
    assert ok["pipeline"] == "zero" and ok["target"] is None and ok["exit_code"] == 0
    assert ok["max_abs_error"] < 1e-4 and ok["times"]["load"] > 0 and ok["rss_mb"] > 50
    crash = rows["segfault.py"]
    assert crash["exit_code"] == -signal.SIGSEGV and "SIGSEGV" in crash["error"] and crash["stage"] == "load"
    hang = rows["hang.py"]
    assert TIMEOUT <= hang["seconds"] < TIMEOUT + 30 and f"after {TIMEOUT} s" in hang["error"]
    bad = rows["bad_inputs.py"]
    assert bad["stage"] == "load" and "tuple" in bad["error"] and bad["exit_code"] == 1
    # the hung check was killed with its process group, not left running
    for pid in (folder / "hang.ran").read_text().split():
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    summary = json.loads((folder / "corpus.json").read_text())["summary"]
    assert summary == {"rows": 4, "ok": 1, "graceful": 1, "crash": 1, "timeout": 1, "memory": 0}
    page = (folder / "corpus.html").read_text()
    assert page.count("<tr>") == 5 and all(name in page for name in MODELS)
    assert "addEventListener('click'" in page and ">timeout<" in page


def test_rerun_resumes_and_ctrl_c_keeps_what_finished(first_run):
    folder, first, _ = first_run
    assert first.returncode == 1, first.stdout + first.stderr
    before = _rows(folder)
    # as if the first run had been stopped before bad_inputs.py finished, and a new model added
    data = json.loads((folder / "corpus.json").read_text())
    data["models"] = [r for r in data["models"] if not r["model"].endswith("bad_inputs.py")]
    (folder / "corpus.json").write_text(json.dumps(data))
    for p in folder.glob("*.ran"):
        p.unlink()
    _write(folder, "hang_too.py", MODELS["hang.py"])
    # the hang's own timeout well past the wait below, so it is still running when Ctrl-C comes
    # however long a loaded machine takes to start its check
    # Ctrl-C as a terminal delivers it: a shell runs a background job (nohup ... &, as CI may run
    # the suite) with SIGINT ignored, and a child inherits that
    proc = subprocess.Popen(_corpus_cmd(folder, ["hang_too.py", *MODELS], "--timeout", "400"), cwd=folder,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 300
        while "bad_inputs.py" not in _rows(folder) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(1)
        assert proc.poll() is None, proc.communicate()
        assert "bad_inputs.py" in _rows(folder)
        while not (folder / "hang_too.ran").exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        assert proc.poll() is None and (folder / "hang_too.ran").exists(), proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    assert "3 already in" in out and "interrupted: 1 rows kept, 1 not run" in err
    rows = _rows(folder)
    assert set(rows) == set(MODELS)  # hang_too.py was stopped: no row, it runs next time
    assert rows["bad_inputs.py"]["result"] == "graceful"
    assert _ran(folder) == {"bad_inputs.py", "hang_too.py"}  # the other rows were not run again
    for name in ("tiny_mlp.py", "segfault.py", "hang.py"):
        assert rows[name] == before[name]
    for pid in (folder / "hang_too.ran").read_text().split():  # the interrupted check went too
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    # every row there: nothing to run, no Ray started
    done = subprocess.run(_corpus_cmd(folder, list(MODELS)), cwd=folder, env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert "4 already in" in done.stdout and "0 to run" in done.stdout and "Ray started" not in done.stdout
    assert done.returncode == 1  # the file still holds a crash and a timeout


def test_bad_arguments_are_refused_before_ray_starts(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "irviz", "corpus", "no_such_model.py", "--json",
                           str(tmp_path / "c.json")], cwd=tmp_path, env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "no_such_model.py: no such model file" in proc.stderr
    (tmp_path / "other.json").write_text('{"rows": []}')
    (tmp_path / "m.py").write_text("def get_model():\n    pass\n")
    proc = subprocess.run([sys.executable, "-m", "irviz", "corpus", "m.py", "--json", "other.json"],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "not a corpus results file" in proc.stderr


def test_the_exit_code_and_the_json_decide_the_result():
    """check's exit codes (0 passed, 1 failed with a verdict, 3 built and not run here, 2 arguments
    refused) against what its JSON says; a process that dies after its verdict still crashed."""
    passed, failed = {"ok": True}, {"ok": False, "failed_stage": "import", "error": "no converter for aten.x"}
    assert classify(Outcome(0, 1.0), passed)["result"] == "ok"
    assert classify(Outcome(3, 1.0), passed)["result"] == "ok"
    assert classify(Outcome(1, 1.0), failed) == {"result": "graceful", "stage": "import",
                                                 "error": "no converter for aten.x"}
    late = classify(Outcome(-signal.SIGSEGV, 1.0, stderr="!!!!!!! Segfault encountered !!!!!!!\n  File x\n"), passed)
    assert late["result"] == "crash" and late["stage"] == "exit"
    assert "SIGSEGV after its verdict (passed): !!!!!!! Segfault encountered" in late["error"]
    usage = classify(Outcome(2, 0.5, stderr="usage: irviz check ...\nirviz check: error: unknown pipeline\n"), None)
    assert usage == {"result": "graceful", "stage": "arguments", "error": "irviz check: error: unknown pipeline"}
    died = classify(Outcome(1, 9.0, stdout="load        2.1 s  m\ncapture     1.0 s  9 FX nodes\n",
                            stderr="Traceback (most recent call last):\n  File x\nRuntimeError: boom\n"), None)
    assert died["result"] == "crash" and died["stage"] == "import" and "exit code 1, no verdict: RuntimeError: boom" in died["error"]
    killed = classify(Outcome(-9, 30.0, over_memory=True, stdout="   2 FuseOps  0.1 s\n"), None, 60, 3 * 2**30)
    assert killed["result"] == "memory" and killed["stage"] == "pipeline" and "over 3 GB" in killed["error"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_address_where_no_cluster_listens_is_refused_at_once(tmp_path):
    pytest.importorskip("ray", reason="pip install 'irviz[corpus]'")
    _write(tmp_path, "bad_inputs.py", MODELS["bad_inputs.py"])
    port = _free_port()
    t0 = time.monotonic()
    proc = subprocess.run(_corpus_cmd(tmp_path, ["bad_inputs.py"], "--address", f"127.0.0.1:{port}"),
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"nothing answered at 127.0.0.1:{port}" in proc.stderr and "ray start --head" in proc.stderr
    assert time.monotonic() - t0 < 60  # Ray alone retries such an address for minutes
    assert not (tmp_path / "bad_inputs.ran").exists()


def test_rows_run_on_a_cluster_started_by_ray_start(tmp_path):
    """`ray start --head` as a user who has a Ray token runs it (token authentication on), then
    `irviz corpus --address` sends the token it finds and runs the rows there."""
    pytest.importorskip("ray", reason="pip install 'irviz[corpus]'")
    ray_cli = Path(sys.executable).with_name("ray")
    if not ray_cli.exists():
        pytest.skip("the ray command is not next to this Python")
    _write(tmp_path, "bad_inputs.py", MODELS["bad_inputs.py"])
    env = _env()
    env.pop("RAY_AUTH_MODE", None)
    env["HOME"] = str(tmp_path / "home")  # the token ray start makes, not this machine's
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    subprocess.run([str(ray_cli), "get-auth-token", "--generate"], env=env, capture_output=True, check=True,
                   timeout=120)
    port = _free_port()
    # Ray's socket paths live under its temp dir and must stay short
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    head = subprocess.Popen([str(ray_cli), "start", "--head", "--block", "--port", str(port), "--num-cpus", "1",
                             "--include-dashboard", "false", "--temp-dir", temp],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
                break
            except OSError:
                assert head.poll() is None, "ray start --head exited"
                time.sleep(1)
        time.sleep(3)  # the GCS listens a little before the head's raylet has joined
        proc = subprocess.run(_corpus_cmd(tmp_path, ["bad_inputs.py"], "--address", f"127.0.0.1:{port}"),
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    finally:
        os.killpg(head.pid, signal.SIGKILL)  # a SIGTERM drains the node for 30 s first
        head.wait(timeout=30)
        shutil.rmtree(temp, ignore_errors=True)
    assert f"on the Ray cluster at 127.0.0.1:{port}" in proc.stdout, proc.stdout + proc.stderr
    assert (tmp_path / "home" / ".ray" / "auth_token").is_file()  # the cluster did use a token
    assert _rows(tmp_path)["bad_inputs.py"]["result"] == "graceful", proc.stdout + proc.stderr
    assert (tmp_path / "bad_inputs.ran").exists()
