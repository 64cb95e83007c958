"""`irviz tune` headless: Ctrl-C keeps what was measured; a tracker that is not there is an error."""
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

tvm_ffi = pytest.importorskip("tvm_ffi")
if getattr(tvm_ffi, "__version__", "").startswith("0.1.15"):
    pytest.skip("apache-tvm-ffi 0.1.15 segfaults in save_json, which MetaSchedule calls: install "
                "constraints.txt's 0.1.14.post1", allow_module_level=True)
for _mod in ("psutil", "xgboost", "cloudpickle", "tornado"):
    pytest.importorskip(_mod, reason="pip install 'irviz[tune]'")

ROOT = Path(__file__).resolve().parents[2]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def _records(db: Path) -> int:
    path = db / "database_tuning_record.json"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_ctrl_c_keeps_the_measured_records(tmp_path):
    db = tmp_path / "db"
    proc = subprocess.Popen([sys.executable, "-m", "irviz", "tune", "sample:matmul_relu", "--trials", "200",
                             "--top", "1", "--db", str(db)], cwd=tmp_path, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.time() + 150
        while _records(db) == 0 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.5)
        assert _records(db) > 0, "no candidate was measured"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err[-2000:]
    assert "what was measured is in" in err
    kept = _records(db)
    assert kept > 0
    from tvm.s_tir import meta_schedule as ms

    loaded = ms.database.JSONDatabase(path_workload=str(db / "database_workload.json"),
                                      path_tuning_record=str(db / "database_tuning_record.json"))
    assert len(loaded) == kept


def test_unreachable_tracker_exits_non_zero(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = subprocess.run([sys.executable, "-m", "irviz", "tune", "sample:matmul_relu", "--trials", "4",
                          "--rpc", f"127.0.0.1:{port}", "--key", "board", "--db", str(tmp_path / "db")],
                         cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert "cannot reach the RPC tracker" in res.stderr
    assert "load" not in res.stdout  # nothing was loaded
