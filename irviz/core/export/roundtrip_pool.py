"""Run written step files back in forked children while the export writes the next ones.

TVM's script parser is pure Python on one thread: on a ~300-binding transformer it takes one to
two seconds per step, most of a whole-trace export.  A forked child already has TVM imported and
the step's module in memory, so nothing is pickled or imported again, and the children keep the
other cores busy while this process prints scripts and diffs.

What a child reports is what :func:`step_files.roundtrip_check` saw in it, so `loadable` stays a
thing seen, never inferred.  A fork can only cost time, never a wrong label: a child that does
not answer in time (a lock another thread held at the fork) is killed and its file is checked
again in this process.  A child the parser crashed is not retried here, where the same crash
would take the whole engine down: its file is reported not loadable, with the signal.
"""
from __future__ import annotations

import json
import os
import select
import signal
import time

__all__ = ["RoundtripPool", "usable_cores"]


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _timeout_for(path) -> float:
    """Generous: a deadlocked child only costs this long before the file is checked here."""
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    return 60.0 + 30.0 * size / 100_000


class RoundtripPool:
    """``submit(key, path, mod)`` then ``results()`` -> {key: (loads, equal, note)}.

    check: ``roundtrip_check(path, mod)``.  workers: children at once (default: the usable cores;
    with one core, or without ``os.fork``, every check runs in this process as it is submitted).
    """

    def __init__(self, check, workers: int | None = None):
        self._check = check
        n = usable_cores() if workers is None else workers
        self.workers = n if hasattr(os, "fork") and n > 1 else 0
        self._waiting: list[tuple] = []
        self._running: dict[int, tuple] = {}  # read fd -> (key, path, mod, pid, deadline, chunks)
        self._done: dict = {}
        self.forked = 0
        self.rechecked = 0

    def submit(self, key, path, mod) -> None:
        if not self.workers:
            self._done[key] = self._check(path, mod)
            return
        self._waiting.append((key, path, mod))
        self._drain(block=False)

    def poll(self) -> None:
        """Collect the children that answered and start waiting ones, without blocking."""
        if self.workers:
            self._drain(block=False)

    def results(self) -> dict:
        while self._waiting or self._running:
            self._drain(block=True)
        return self._done

    def _start(self, key, path, mod) -> None:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: check, answer, leave without running this process's exit code
            code = 0
            try:
                os.close(r)
                data = json.dumps(list(self._check(path, mod))).encode()
                view = memoryview(data)
                while view:
                    view = view[os.write(w, view):]
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        self.forked += 1
        self._running[r] = (key, path, mod, pid, time.monotonic() + _timeout_for(path), [])

    def _drain(self, block: bool) -> None:
        while self._waiting and len(self._running) < self.workers:
            self._start(*self._waiting.pop(0))
        if not self._running:
            return
        now = time.monotonic()
        wait = max(0.0, min(v[4] for v in self._running.values()) - now) if block else 0.0
        ready, _, _ = select.select(list(self._running), [], [], wait)
        for fd in ready:
            chunk = os.read(fd, 1 << 16)
            if chunk:
                self._running[fd][5].append(chunk)
                continue
            self._finish(fd, timed_out=False)
        now = time.monotonic()
        for fd in [fd for fd, v in self._running.items() if v[4] <= now]:
            self._finish(fd, timed_out=True)
        while self._waiting and len(self._running) < self.workers:
            self._start(*self._waiting.pop(0))

    def _finish(self, fd: int, timed_out: bool) -> None:
        key, path, mod, pid, _, chunks = self._running.pop(fd)
        os.close(fd)
        if timed_out:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, status = os.waitpid(pid, 0)
        answer = None
        if not timed_out and os.WIFSIGNALED(status):
            sig = signal.Signals(os.WTERMSIG(status)).name
            self._done[key] = (False, False, f"TVM crashed ({sig}) running the file back "
                                             "in a copy of this process")
            return
        if not timed_out and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            try:
                answer = tuple(json.loads(b"".join(chunks)))
            except ValueError:
                answer = None
        if answer is None or len(answer) != 3:
            self.rechecked += 1
            answer = self._check(path, mod)
        self._done[key] = answer
