"""The engine process's life: start `python -m irviz.engine` under QProcess, keep a warm spare,
restart after a crash and replay the session to the last good step, cancel by killing it.

The bridge keeps the session *recipe* (spec, importer, applied passes, planned passes, cursor)
from the last state it saw. When the engine dies (TVM segfaults) it starts a new one, sends
`replay` with the recipe, re-emits the state and says what happened with `engineRestarted`.
`cancel()` is the same with a deliberate kill, so it works in the middle of a pass.
Requests and replies are routed by the :class:`irviz.ui.request_routing.RequestRouter` it owns
(`router`), the recipe kept by its :class:`irviz.ui.session_replay.SessionReplay` (`replay`).
"""
from __future__ import annotations

import gc
import json
import os
import signal
import sys
import time
from collections import deque
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QObject, QProcess, QProcessEnvironment, QTimer, Signal

from irviz.protocol.commands import State
from irviz.protocol.parts import PartJoiner
from irviz.ui.request_routing import Request, RequestRouter, RouterHooks
from irviz.ui.session_replay import SessionReplay

# Stop restarting when the engine dies this many times in a row before saying "ready".
MAX_START_FAILURES = 3

# The spare engine starts this long after the bridge goes idle with a model open.
SPARE_DELAY_MS = 3000
WARM_ID = -1     # request id of the spare's `warm` (its reply is ignored by the promoted engine)
# the GUI thread decodes and dispatches replies for about this long, then lets other events in
# (a big reply comes in parts: irviz.protocol.parts)
READ_BUDGET_S = 0.010
UNFREEZE_EVERY = 16   # big replies between two full garbage collections of what they left

_REPO_ROOT = str(Path(__file__).resolve().parents[2])


class _Engine:
    """One engine process and what the bridge knows about it."""

    def __init__(self, qp: QProcess, spare: bool = False):
        self.qp = qp
        self.spare = spare        # started in advance; not answering requests yet
        self.ready = False        # said {"event": "ready"}
        self.warm = False         # (spare) torch + TVM imported
        self.pid = 0
        self.out = bytearray()
        self.scanned = 0  # bytes of `out` known to hold no newline
        self.joiner = PartJoiner()
        self.resume = False       # a turn of the event loop will go on reading `out`
        self.err = b""
        self.retired = False      # killed or replaced: every signal from it is ignored
        self.accepting = False    # replay (if any) sent: new requests may go straight to it
        self.paused = False       # (spare) stopped with SIGSTOP while the current engine works


class EngineBridge(QObject):
    """Requests in, signals out. One engine process at a time; restarted and replayed on death."""

    replied = Signal(int, str, object)      # id, cmd, result
    failed = Signal(int, str, dict)         # id, cmd, error {stage, message, hint, detail}
    progress = Signal(int, str, float)      # id, text, fraction (-1.0 when unknown)
    busyChanged = Signal(bool)
    engineRestarted = Signal(str)           # human-readable reason, says where the user is now
    stateChanged = Signal(dict)             # every state the engine reports (also after replay)
    engineReady = Signal(int)               # pid of a freshly started engine
    logLine = Signal(str)                   # one line of the engine's stderr

    def __init__(self, parent: QObject | None = None, *, program: str | None = None,
                 arguments: list[str] | None = None, env: dict | None = None,
                 autostart: bool = True, spare: bool | None = None):
        super().__init__(parent)
        self.router = RequestRouter(RouterHooks(
            submit=self._submit, write=self._write, took_state=lambda st: self.replay.remember(st),
            note_reply=lambda req, res: self.replay.note_reply(req, res),
            on_internal_reply=lambda *a: self.replay.on_internal_reply(*a),
            restarting=lambda: self.replay.pending_reason is not None, on_idle=self._schedule_spare), self)
        self.replay = SessionReplay(self.router, self.engineRestarted.emit)
        for name in ("replied", "failed", "progress", "busyChanged", "stateChanged"):
            getattr(self.router, name).connect(getattr(self, name))
        self._program = program or sys.executable
        self._arguments = list(arguments) if arguments is not None else ["-m", "irviz.engine"]
        self._extra_env = dict(env or {})
        self._eng: _Engine | None = None            # the engine answering requests
        self._spare: _Engine | None = None          # a warm engine waiting to take over
        self._freezes = 0
        self._use_spare = (os.environ.get("IRVIZ_ENGINE_SPARE", "1") != "0") if spare is None else spare
        self._spare_timer = QTimer(self)
        self._spare_timer.setSingleShot(True)
        self._spare_timer.timeout.connect(self._start_spare)
        self.busyChanged.connect(self._pause_spare)
        self._stderr_tail: deque[str] = deque(maxlen=200)
        self._start_failures = 0
        self._dead_reason: str | None = None
        self._shutting_down = False
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        if autostart:
            self.start()

    # ------------------------------------------------------------------------------ public API

    def request(self, cmd: str, supersede: bool | str | None = None, **args) -> int:
        """Send `cmd` with `args`; returns the request id used in replied/failed/progress
        (`supersede`: see :meth:`irviz.ui.request_routing.RequestRouter.request`)."""
        return self.router.request(cmd, supersede, **args)

    @property
    def busy(self) -> bool:
        return self.router.busy

    @property
    def state(self) -> State | None:
        """The last state the engine reported."""
        return self.router.state

    @property
    def ready(self) -> bool:
        return self._eng is not None and self._eng.ready

    @property
    def pid(self) -> int:
        """pid of the running engine (0 while starting)."""
        return self._eng.pid if self._eng is not None and self._eng.ready else 0

    @property
    def spare_warm(self) -> bool:
        """True when a spare engine has torch + TVM loaded and has run one import (fast restarts)."""
        return self._spare is not None and self._spare.warm

    @property
    def spare_pid(self) -> int:
        """pid of the warm spare engine (0 when there is none yet)."""
        return self._spare.pid if self._spare is not None and self._spare.ready else 0

    @property
    def recipe(self) -> dict | None:
        """What `replay` needs to rebuild the last good state: spec, importer, applied, planned,
        cursor (and pass_files / converter_files, the user files loaded so far)."""
        return self.replay.full_recipe()

    @property
    def _recipe(self) -> dict | None:
        return self.replay.recipe

    @_recipe.setter
    def _recipe(self, recipe: dict | None) -> None:
        self.replay.recipe = recipe

    def _take_state(self, state: State) -> None:
        self.router.take_state(state)

    @property
    def converter_files(self) -> list[str]:
        """Converter files loaded (load_converters) so far, in order; re-sent on replay."""
        return list(self.replay.converter_files)

    @property
    def restarts(self) -> int:
        return self.replay.restarts

    @property
    def last_restart_seconds(self) -> float | None:
        return self.replay.last_restart_seconds

    def stderr_tail(self, lines: int = 40) -> str:
        return "\n".join(list(self._stderr_tail)[-lines:])

    def start(self) -> None:
        """Start the engine (no-op when one is running or starting)."""
        if self._eng is not None:
            return
        self._dead_reason = None
        self._shutting_down = False
        self._spawn()

    def _submit(self, req: Request) -> None:
        rid, cmd = req.id, req.cmd
        if self._dead_reason is not None:
            # no engine: answer asynchronously so callers always get their signal after request()
            err = {"stage": "engine", "message": self._dead_reason,
                   "hint": "Restart the engine (File ▸ Restart engine) or check the log.", "detail": self.stderr_tail()}
            QTimer.singleShot(0, self, lambda: self.failed.emit(rid, cmd, err))
            return
        if self._eng is not None and self._eng.accepting:
            self.router.send(req)
        else:
            self.router.queue.append(req)
            if self._eng is None:
                self._shutting_down = False
                self._spawn()

    def cancel(self) -> bool:
        """Stop whatever the engine is doing: kill it, start a new one, replay to the last state.

        Every request sent or queued fails with stage "cancelled". Returns False when idle."""
        rt = self.router
        if not rt.busy or self._eng is None:
            return False
        running = next((r for r in rt.inflight.values() if not r.stale), None)
        replaying = any(r.internal for r in rt.inflight.values()) or any(r.internal for r in rt.queue)
        what = rt.describe(running) if running is not None else "the queued requests"
        doomed = [r for r in list(rt.inflight.values()) + rt.queue if not r.internal and not r.stale]
        rt.inflight.clear()
        rt.queue.clear()
        self.replay.cancelled(what, replaying)
        self._kill_current()
        self._spawn()
        rt.update_busy()
        for r in doomed:
            self.failed.emit(r.id, r.cmd, {"stage": "cancelled", "message": f"Cancelled {what}.",
                                           "hint": None, "detail": None})
        return True

    def restart(self, reason: str = "Restarted the engine.") -> None:
        """Kill and restart the engine, replaying the session (queued requests are kept)."""
        rt = self.router
        requeue = [r for r in rt.inflight.values() if not r.internal and not r.stale]
        rt.inflight.clear()
        rt.queue = requeue + [r for r in rt.queue if not r.internal]
        self.replay.pending_reason = reason
        self._kill_current()
        self._dead_reason = None
        self._spawn()
        rt.update_busy()

    def shutdown(self, timeout_ms: int = 2000) -> None:
        """Ask the engine (and the spare) to exit (EOF on stdin); kill them if they do not.
        Blocks up to timeout_ms: meant for application exit and tests."""
        self._shutting_down = True
        self._spare_timer.stop()
        if self._spare is not None:       # nothing to save in the spare
            self._retire(self._spare)
            self._spare = None
        engines = [e for e in (self._eng,) if e is not None]
        self._eng = None
        for e in engines:
            e.retired = True
            try:
                e.qp.closeWriteChannel()
            except RuntimeError:  # already deleted by Qt
                pass
        for e in engines:
            try:
                if e.qp.state() != QProcess.ProcessState.NotRunning and not e.qp.waitForFinished(timeout_ms):
                    e.qp.kill()
                    e.qp.waitForFinished(1000)
            except RuntimeError:
                pass

    def kill_engine(self) -> None:
        """Kill the engine process as a crash would (SIGKILL); the bridge restarts and replays."""
        if self._eng is not None:
            self._eng.qp.kill()

    # ------------------------------------------------------------------------------ process

    def _new_process(self, spare: bool = False) -> _Engine:
        qp = QProcess(self)
        env = QProcessEnvironment.systemEnvironment()
        pp = env.value("PYTHONPATH", "")
        env.insert("PYTHONPATH", _REPO_ROOT + (os.pathsep + pp if pp else ""))
        env.insert("PYTHONUNBUFFERED", "1")
        for k, v in self._extra_env.items():
            env.insert(str(k), str(v))
        qp.setProcessEnvironment(env)
        qp.setProgram(self._program)
        qp.setArguments(self._arguments)
        eng = _Engine(qp, spare=spare)
        qp.readyReadStandardOutput.connect(lambda: self._on_stdout(eng))
        qp.readyReadStandardError.connect(lambda: self._on_stderr(eng))
        qp.finished.connect(lambda code, status: self._on_finished(eng, code, status))
        qp.errorOccurred.connect(lambda err: self._on_error(eng, err))
        qp.start()
        return eng

    def _spawn(self) -> None:
        """Make a new current engine: the warm spare when there is one, else a fresh process."""
        self.replay.restart_t0 = time.perf_counter()
        spare, self._spare = self._spare, None
        if spare is not None and spare.qp.state() != QProcess.ProcessState.NotRunning:
            _signal_paused(spare, False)
            spare.spare = False
            self._eng = spare
            if spare.ready:
                # deferred: callers finish their own bookkeeping (and signals) first
                QTimer.singleShot(0, self, lambda: self._on_ready(spare) if spare is self._eng else None)
            return
        if spare is not None:
            self._retire(spare)
        self._eng = self._new_process()

    def _retire(self, eng: _Engine) -> None:
        eng.retired = True
        try:
            if eng.qp.state() != QProcess.ProcessState.NotRunning:
                eng.qp.kill()
                eng.qp.finished.connect(eng.qp.deleteLater)
            else:
                eng.qp.deleteLater()
        except RuntimeError:
            pass

    def _kill_current(self) -> None:
        eng, self._eng = self._eng, None
        if eng is not None:
            self._retire(eng)

    def _schedule_spare(self) -> None:
        if (not self._use_spare or self._spare is not None or self._spare_timer.isActive()
                or self.replay.recipe is None or self._dead_reason is not None or self._shutting_down):
            return
        self._spare_timer.start(SPARE_DELAY_MS)

    def _start_spare(self) -> None:
        if self._spare is not None or self._shutting_down or self._dead_reason is not None \
                or self._eng is None or not self._use_spare:
            return
        if self.router.busy:
            self._spare_timer.start(SPARE_DELAY_MS)   # do not compete with real work on 2 cores
            return
        self._spare = self._new_process(spare=True)

    def _pause_spare(self, busy: bool) -> None:
        # A spare importing torch and TVM takes both cores of a 2-core machine for seconds: beside a
        # build_run it slows the build and makes the engine's timing figures say nothing. It waits,
        # stopped, while the engine works and goes on warming when it is idle.
        if self._spare is not None:
            _signal_paused(self._spare, busy)

    def _write(self, line: bytes) -> None:
        assert self._eng is not None  # the router writes only while an engine is ready
        self._eng.qp.write(line)

    def _on_stderr(self, eng: _Engine) -> None:
        if eng.retired:
            return
        try:
            eng.err += eng.qp.readAllStandardError().data()
        except RuntimeError:
            return
        *lines, eng.err = eng.err.split(b"\n")
        for raw in lines:
            text = raw.decode("utf-8", "replace").rstrip()
            if eng.spare:
                text = "[spare] " + text
            self._stderr_tail.append(text)
            self.logLine.emit(text)
            if os.environ.get("IRVIZ_ENGINE_LOG"):
                print(f"[engine {eng.pid}] {text}", file=sys.stderr)

    def _on_stdout(self, eng: _Engine, drain: bool = False) -> None:
        if eng.retired:
            return
        try:
            eng.out += eng.qp.readAllStandardOutput().data()
        except RuntimeError:
            return
        self._read_lines(eng, drain)

    def _read_lines(self, eng: _Engine, drain: bool = False) -> None:
        """Decode and act on the complete lines in `eng.out`, for about READ_BUDGET_S (at least one
        line), then go on in a later turn of the event loop (`drain`: all of them now)."""
        deadline = time.perf_counter() + READ_BUDGET_S
        while True:
            # a reply of several MB arrives in 64 KB reads: search only the new bytes, and cut
            # the buffer once per line (re-scanning and re-copying it per read took ~0.3 s)
            nl = eng.out.find(b"\n", eng.scanned)
            if nl < 0:
                eng.scanned = len(eng.out)
                return
            raw = bytes(eng.out[:nl])
            del eng.out[:nl + 1]
            eng.scanned = 0
            if eng.retired:
                return
            try:
                msg = json.loads(raw) if raw.strip() else None
            except ValueError:
                msg = None
            if not isinstance(msg, dict):
                if raw.strip():
                    self._stderr_tail.append("[stdout] " + raw.decode("utf-8", "replace"))
            else:
                parted = "part" in msg or "parts" in msg
                msg = eng.joiner.feed(msg)      # None: more parts to come
                if msg is not None and eng.spare:
                    self._on_spare_message(eng, msg)
                elif msg is not None and eng is self._eng:
                    self._on_message(msg)
                    if eng is not self._eng:
                        return      # a handler restarted the engine
                if parted:
                    # a big reply is ~100,000 dicts and lists that live until the next step; out of
                    # the collector's sight (they are freed by their counts), its full passes scan
                    # only what is new: over an 8B LLM's graphs they took 40-70 ms, at any moment.
                    # Cyclic garbage frozen with them would never be freed, so every so often the
                    # lot goes back to the collector: one full pass then, not one per reply
                    self._freezes += 1
                    if self._freezes % UNFREEZE_EVERY:
                        gc.freeze()
                    else:
                        gc.unfreeze()
            if not drain and time.perf_counter() > deadline and b"\n" in eng.out:
                if not eng.resume:
                    eng.resume = True
                    QTimer.singleShot(0, self, lambda: self._resume_reading(eng))
                return

    def _resume_reading(self, eng: _Engine) -> None:
        eng.resume = False
        if not eng.retired:
            self._read_lines(eng)

    def _on_spare_message(self, eng: _Engine, msg: dict) -> None:
        if msg.get("event") == "ready":
            eng.ready = True
            eng.pid = int(msg.get("pid") or 0)
            eng.qp.write((json.dumps({"id": WARM_ID, "cmd": "warm", "args": {}}) + "\n").encode())
        elif msg.get("id") == WARM_ID and "progress" not in msg:
            eng.warm = bool(msg.get("ok"))

    def _on_message(self, msg: dict) -> None:
        if msg.get("event") == "ready":
            eng = self._eng
            assert eng is not None  # messages come from the running engine (a retired one's are dropped)
            eng.ready = True
            eng.pid = int(msg.get("pid") or 0)
            self._on_ready(eng)
            return
        self.router.route(msg)

    def _on_ready(self, eng: _Engine) -> None:
        if eng.accepting:
            return
        eng.accepting = True
        self._start_failures = 0
        self.engineReady.emit(eng.pid)
        self.replay.engine_ready()
        queue, self.router.queue = self.router.queue, []
        for r in queue:
            self.router.send(r)
        self.router.update_busy()

    def _on_error(self, eng: _Engine, err) -> None:
        if eng.retired:
            return
        if err == QProcess.ProcessError.FailedToStart:
            if eng.spare:
                self._spare = None
                self._use_spare = False
                return
            self._declare_dead(f"Could not start the engine ({self._program} "
                               f"{' '.join(self._arguments)}): {eng.qp.errorString()}")
        # Crashed / read/write errors are followed by `finished`, handled there.

    def _on_finished(self, eng: _Engine, code: int, status) -> None:
        if eng.retired or self._shutting_down:
            return
        if eng.spare:
            eng.retired = True
            if eng is self._spare:
                self._spare = None
            eng.qp.deleteLater()
            return
        if eng is not self._eng:
            return
        # replies written just before dying are still worth reading
        self._on_stdout(eng, drain=True)
        self._on_stderr(eng)
        if eng is not self._eng:
            return
        was_ready = eng.ready
        eng.retired = True
        self._eng = None
        eng.qp.deleteLater()
        if status == QProcess.ExitStatus.CrashExit:
            how = f"crashed (signal {code})" if code else "crashed"
        else:
            how = f"exited (code {code})"
        if not was_ready:
            self._start_failures += 1
            if self._start_failures >= MAX_START_FAILURES:
                self._declare_dead(f"The engine {how} before it was ready, {self._start_failures} times "
                                   f"in a row. Last log lines:\n{self.stderr_tail(15)}")
                return
        inflight = list(self.router.inflight.values())
        self.router.inflight.clear()
        culprit = inflight[0] if inflight else None     # the engine answers in order
        text = self.replay.engine_died(culprit, how, was_ready)
        culprit_error = None
        if culprit is not None and text is not None and not culprit.stale:
            # a superseded culprit: nobody waits for it (nor is it re-sent)
            culprit_error = {
                "stage": "engine", "message": text,
                "hint": "The engine was restarted and the session replayed to the last good step.",
                "detail": self.stderr_tail()}
        # innocent requests sent after the culprit are sent again once the engine is back
        requeue = [r for r in inflight if r is not culprit and not r.stale and not r.internal]
        self.router.queue[0:0] = requeue
        self._spawn()
        self.router.update_busy()
        if culprit is not None and culprit_error is not None:
            self.failed.emit(culprit.id, culprit.cmd, culprit_error)

    def _declare_dead(self, reason: str) -> None:
        self._dead_reason = reason
        for eng in (self._eng, self._spare):
            if eng is not None:
                self._retire(eng)
        self._eng = None
        self._spare = None
        self.replay.pending_reason = None
        self.router.fail_all({"stage": "engine", "message": reason, "hint": "Check the log; restart the engine.",
                        "detail": self.stderr_tail()})


def _signal_paused(eng: _Engine, paused: bool) -> None:
    """Stop (SIGSTOP) or continue (SIGCONT) an engine process; nothing where there are no such
    signals, or once it has exited."""
    if eng.paused == paused or not hasattr(signal, "SIGSTOP"):
        return
    pid = int(eng.qp.processId() or 0)
    if pid <= 0 or eng.qp.state() == QProcess.ProcessState.NotRunning:
        return
    try:
        os.kill(pid, signal.SIGSTOP if paused else signal.SIGCONT)
    except OSError:
        return
    eng.paused = paused
