"""One row of a corpus: `irviz check MODEL --pipeline P [--target T] --json J` in its own process,
and its result read from the exit code and the JSON it wrote:

    ok        the check passed (exit 0), or built for a target whose device is not here (exit 3)
    graceful  the check stopped with a stage and a message (exit 1 and a JSON that says so), or
              refused its arguments (exit 2, argparse's usage error)
    crash     the process died without a verdict (a signal, an uncaught exception), or after it
    timeout   killed at the corpus's --timeout
    memory    killed past the corpus's --memory-gb of resident memory
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

from irviz.core.corpus.isolate import Outcome, run_isolated

RESULTS = ("ok", "graceful", "crash", "timeout", "memory")
# check's exit codes (irviz/cli/check.py): 0 passed, 1 failed with a verdict, 3 built but not
# run here; 2 is argparse's for arguments it refuses
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_RUN = 0, 1, 2, 3

# check's log line → the stage that runs after it: a process that dies leaves the last line it
# printed, which names the stage that finished, not the one that killed it
_NEXT_STAGE = {"load": "capture", "capture": "import", "import": "pipeline", "build": "run",
               "run": "run", "timing": "run", "kernels": "run", "kernel": "run", "roofline": "run",
               "memory": "run", "estimate": "estimate", "nodes": "intermediates"}


def key(job: dict) -> tuple[str, str, str]:
    """What identifies a row, and what a rerun skips."""
    return job["model"], job.get("pipeline") or "", job.get("target") or ""


def check_command(job: dict, opts: dict, json_path: str) -> list[str]:
    # the Python of the process running the row (a Ray worker on whichever node), not the driver's
    cmd = [opts.get("python") or sys.executable, "-m", "irviz", "check", job["model"],
           "--json", json_path, "--repeats", str(opts.get("repeats", 1))]
    if job.get("pipeline"):
        cmd += ["--pipeline", job["pipeline"]]
    if job.get("target"):
        cmd += ["--target", job["target"]]
    return cmd + list(opts.get("check_args") or ())


def _last_line(text: str) -> str:
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _first_line(text: str, width: int = 300) -> str:
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line if len(line) <= width else line[: width - 3] + "..."


def stage_after(log: str) -> str:
    """The stage a check was in when it stopped, from the last line of its log."""
    last = _last_line(log).strip()
    if not last:
        return "load"
    word = last.split()[0]
    if word.isdigit():  # "   3 FoldConstant   0.2 s  changed": a pass step finished
        return "pipeline"
    return _NEXT_STAGE.get(word, "unknown")


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _error_tail(out: Outcome) -> str:
    """The last line of stderr that says something: a traceback's last line, a fatal error's
    banner; not a frame of the native stack trace TVM's signal handler prints after it."""
    for line in reversed(out.stderr.splitlines()):
        if line.strip() and not line[0].isspace() and not line.startswith(("File ", "Traceback", "Stack trace")):
            return line.strip()
    return ""


def classify(out: Outcome, summary: dict | None, timeout: float | None = None,
             memory_bytes: int | None = None) -> dict:
    """result, stage and error of one check from how its process ended and what it wrote."""
    log_line = _last_line(out.stdout)
    where = f"; its log's last line: {log_line.strip()[:200]}" if log_line else "; it printed nothing"
    if out.timed_out:
        return {"result": "timeout", "stage": stage_after(out.stdout),
                "error": f"no verdict after {timeout:g} s (killed){where}"}
    if out.over_memory:
        return {"result": "memory", "stage": stage_after(out.stdout),
                "error": f"over {memory_bytes / 2**30:g} GB resident (killed){where}"}
    if summary is not None and out.returncode in (EXIT_OK, EXIT_FAILED, EXIT_NOT_RUN):
        if summary.get("ok") and out.returncode in (EXIT_OK, EXIT_NOT_RUN):
            return {"result": "ok", "stage": None, "error": None}
        if not summary.get("ok") and out.returncode == EXIT_FAILED:
            return {"result": "graceful", "stage": summary.get("failed_stage"),
                    "error": summary.get("error")}
    if summary is None and out.returncode == EXIT_USAGE:
        return {"result": "graceful", "stage": "arguments", "error": _error_tail(out) or "usage error"}
    if out.returncode < 0:
        how = f"killed by {_signal_name(out.returncode)}"
    else:
        how = f"exit code {out.returncode}"
    if summary is not None:  # a verdict, then the process died on its way out
        verdict = "passed" if summary.get("ok") else f"failed at {summary.get('failed_stage')}"
        return {"result": "crash", "stage": "exit",
                "error": f"{how} after its verdict ({verdict})" + _detail(out)}
    return {"result": "crash", "stage": stage_after(out.stdout),
            "error": f"{how}, no verdict" + _detail(out) + where}


def _detail(out: Outcome) -> str:
    tail = _error_tail(out)
    return f": {tail[:300]}" if tail else ""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[-80:]


def row_log_name(job: dict) -> str:
    return _slug("_".join(part for part in key(job) if part))


def base_row(job: dict, out: Outcome) -> dict:
    return {"model": job["model"], "pipeline": job.get("pipeline"), "target": job.get("target"),
            "exit_code": out.returncode, "seconds": round(out.seconds, 3),
            "rss_mb": round(out.peak_rss_bytes / 2**20, 1), "host": socket.gethostname(),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def check_row(job: dict, opts: dict) -> dict:
    """Run one check (in the process that calls this: a Ray worker) and return its row."""
    timeout, memory = opts.get("timeout"), opts.get("memory_bytes")
    with tempfile.TemporaryDirectory(prefix="irviz-corpus-") as tmp:
        json_path = os.path.join(tmp, "check.json")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(opts.get("env") or {})}
        out = run_isolated(check_command(job, opts, json_path), cwd=opts.get("cwd"), env=env,
                           timeout=timeout, memory_bytes=memory,
                           log_dir=opts.get("log_dir") or tmp, log_name=row_log_name(job))
        summary = None
        try:
            summary = json.loads(Path(json_path).read_text())
        except (OSError, ValueError):
            pass
    row = base_row(job, out)
    row.update(classify(out, summary, timeout, memory))
    if summary is not None:
        row.update(verdict=summary.get("verdict"), max_abs_error=summary.get("max_abs_error"),
                   tvm_ms=summary.get("tvm_ms"), torch_ms=summary.get("torch_ms"),
                   times=summary.get("stage_seconds"), structure_only=summary.get("structure_only"),
                   not_run_reason=summary.get("not_run_reason"), capture=summary.get("capture"),
                   capture_notes=summary.get("capture_notes") or None)
    else:
        row.update(verdict=None, max_abs_error=None, times=None)
    if row["result"] in ("crash", "timeout", "memory"):  # what it said last, to start from
        row["log_tail"] = {"stdout": out.stdout[-1500:], "stderr": out.stderr[-1500:]}
    return row


def failed_task_row(job: dict, error: str) -> dict:
    """The row of a task Ray could not run or lost (its worker died, the node went away)."""
    return {"model": job["model"], "pipeline": job.get("pipeline"), "target": job.get("target"),
            "result": "crash", "stage": "worker", "error": _first_line(error), "exit_code": None,
            "seconds": None, "rss_mb": None, "verdict": None, "max_abs_error": None, "times": None,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
