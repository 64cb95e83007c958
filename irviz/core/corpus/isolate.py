"""One command in a process group of its own, so that a segfault, a hang or a runaway allocation
costs that command only: killed at a timeout or past a resident-memory cap, its peak RSS kept."""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

POLL_S = 0.2


@dataclass
class Outcome:
    returncode: int            # negative: the signal that ended it (as subprocess reports it)
    seconds: float
    timed_out: bool = False
    over_memory: bool = False
    peak_rss_bytes: int = 0    # the largest resident size of the process (or a child it waited for)
    stdout: str = ""
    stderr: str = ""


try:  # loaded here: the child between fork and exec must not take the loader's locks
    _LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:
    _LIBC = None


def _die_with_parent() -> None:
    """A Ray worker killed by a forced cancel or a shutdown takes its command with it (Linux);
    elsewhere the process group kill at timeout still applies."""
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _tree_rss(pid: int) -> int:
    """Resident bytes of the process and its descendants (0 once it is gone)."""
    try:
        import psutil
    except ImportError:  # Linux without psutil: the process alone, from /proc
        try:
            with open(f"/proc/{pid}/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return 0
    try:
        p = psutil.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for q in procs:
        try:
            total += q.memory_info().rss
        except psutil.Error:
            pass
    return total


def _tail(path: Path, limit: int = 20000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def run_isolated(cmd: list[str], *, cwd: str | None = None, env: dict | None = None,
                 timeout: float | None = None, memory_bytes: int | None = None,
                 log_dir: str | Path, log_name: str = "run") -> Outcome:
    """Run `cmd` to its end, or kill its whole process group at `timeout` seconds or once its
    process tree holds more than `memory_bytes` resident. stdout and stderr go to
    LOG_DIR/LOG_NAME.out and .err (files, not pipes: a chatty command never blocks on a full
    pipe); the Outcome keeps their last 20,000 characters."""
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / f"{log_name}.out", log_dir / f"{log_name}.err"
    t0 = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=_die_with_parent)
    timed_out = over_memory = False
    peak_sampled, status, usage = 0, 0, None
    try:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            elapsed = time.monotonic() - t0
            if timeout is not None and elapsed > timeout:
                timed_out = True
            elif memory_bytes is not None:
                rss = _tree_rss(proc.pid)
                peak_sampled = max(peak_sampled, rss)
                over_memory = rss > memory_bytes
            if timed_out or over_memory:
                _kill_group(proc.pid)
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(POLL_S)
    except BaseException:  # a cancel (KeyboardInterrupt in the task): the command goes too
        _kill_group(proc.pid)
        try:
            os.wait4(proc.pid, 0)
        except ChildProcessError:
            pass
        proc.returncode = -signal.SIGKILL
        raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - t0
    # ru_maxrss is in kilobytes on Linux
    peak = max(peak_sampled, (usage.ru_maxrss * 1024) if usage is not None else 0)
    return Outcome(returncode=proc.returncode, seconds=seconds, timed_out=timed_out,
                   over_memory=over_memory, peak_rss_bytes=peak,
                   stdout=_tail(out_path), stderr=_tail(err_path))


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
