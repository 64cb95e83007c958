"""Request/reply routing between the window and the engine: request ids, supersede groups, the
queue of requests not sent yet, the replies and progress turned into Qt signals.

:class:`RequestRouter` knows nothing of processes; :class:`irviz.ui.engine_process.EngineBridge`
owns one and gives it an engine to write to (:class:`RouterHooks`)."""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from irviz.protocol.commands import DEFAULT_SUPERSEDE, STATE_CMDS, State


@dataclass
class Request:
    id: int
    cmd: str
    args: dict
    group: str | None = None
    internal: bool = False      # sent by the bridge itself (replay); not reported through `replied`
    stale: bool = False         # superseded: its reply is dropped
    sent_at: float = 0.0
    progress_text: str = ""
    progress_pass: str = ""     # the pass the engine said it is applying

    def line(self) -> bytes:
        msg = {"id": self.id, "cmd": self.cmd, "args": self.args}
        if self.group is not None:
            msg["group"] = self.group
        return (json.dumps(msg) + "\n").encode("utf-8")


@dataclass(frozen=True)
class RouterHooks:
    """What the engine's owner does for the router."""

    submit: Callable[[Request], None]       # send now, queue until an engine takes requests, or fail it
    write: Callable[[bytes], None]          # one request line to the engine answering requests
    took_state: Callable[[State], None]     # a state was reported (before it is emitted)
    note_reply: Callable[[Request, object], None]   # a request succeeded (what a replay must redo)
    # the reply to a request the bridge sent itself: (request, ok, message, state or None)
    on_internal_reply: Callable[[Request, bool, dict, State | None], None]
    restarting: Callable[[], bool]          # a restart is under way: busy until it is announced
    on_idle: Callable[[], None]             # nothing is sent, queued or restarting


class RequestRouter(QObject):
    """Requests in, signals out; the engine answers in the order it was asked."""

    replied = Signal(int, str, object)      # id, cmd, result
    failed = Signal(int, str, dict)         # id, cmd, error {stage, message, hint, detail}
    progress = Signal(int, str, float)      # id, text, fraction (-1.0 when unknown)
    busyChanged = Signal(bool)
    stateChanged = Signal(dict)             # every state the engine reports (also after replay)

    def __init__(self, hooks: RouterHooks, parent: QObject | None = None):
        super().__init__(parent)
        self._hooks = hooks
        self._next_id = 1
        self.queue: list[Request] = []            # not sent yet (engine starting)
        self.inflight: dict[int, Request] = {}    # sent, in order; engine answers in order
        self._busy = False
        self.state: State | None = None           # the last state the engine reported

    @property
    def busy(self) -> bool:
        return self._busy

    def take_state(self, state: State) -> None:
        """Remember a state the engine reported (before it is emitted); the owner hears of it."""
        self.state = state
        self._hooks.took_state(state)

    def request(self, cmd: str, supersede: bool | str | None = None, **args) -> int:
        """Send `cmd` with `args`; returns the request id used in replied/failed/progress.

        `supersede`: None -> the default for `cmd` (relax_graph and diff supersede), True -> group
        by cmd, a string -> group by that key, False -> never. A newer request in the same group
        drops the older ones: unsent ones are never sent, the replies of sent ones are dropped
        (and the engine skips them if it has not started them yet).
        """
        rid = self.new_id()
        if supersede is None:
            group = cmd if cmd in DEFAULT_SUPERSEDE else None
        elif supersede is True:
            group = cmd
        elif supersede is False:
            group = None
        else:
            group = str(supersede)
        req = Request(rid, cmd, dict(args), group)
        if group is not None:
            self.queue = [r for r in self.queue if r.group != group or r.internal]
            for r in self.inflight.values():
                if r.group == group and not r.internal:
                    r.stale = True
        self._hooks.submit(req)
        self.update_busy()
        return rid

    def new_id(self) -> int:
        rid = self._next_id
        self._next_id += 1
        return rid

    def send(self, req: Request) -> None:
        req.sent_at = time.perf_counter()
        self.inflight[req.id] = req
        self._hooks.write(req.line())

    def route(self, msg: dict) -> None:
        """One message of the engine answering requests: progress, or the reply to the oldest."""
        rid = msg.get("id")
        if not isinstance(rid, int):
            return  # a bad line's reply (id null) answers no request of ours
        if "progress" in msg:
            req = self.inflight.get(rid)
            if req is None or req.stale:
                return
            req.progress_text = str(msg["progress"])
            if msg.get("pass"):
                req.progress_pass = str(msg["pass"])
            frac = msg.get("fraction")
            self.progress.emit(rid, req.progress_text, float(frac) if frac is not None else -1.0)
            return
        req = self.inflight.pop(rid, None)
        if req is None:
            return
        ok = bool(msg.get("ok"))
        state: State | None = None
        if ok and req.cmd in STATE_CMDS and isinstance(msg.get("result"), dict):
            state = msg["result"]
        elif not ok and isinstance(msg.get("state"), dict):
            state = msg["state"]
        if ok:
            self._hooks.note_reply(req, msg.get("result"))
        if req.internal:
            self._hooks.on_internal_reply(req, ok, msg, state)
        else:
            if state is not None:
                self.take_state(state)
            if not req.stale:
                if ok:
                    self.replied.emit(req.id, req.cmd, msg.get("result"))
                else:
                    err = msg.get("error") or {}
                    if err.get("stage") != "superseded":
                        self.failed.emit(req.id, req.cmd, dict(err))
            if state is not None:
                self.stateChanged.emit(state)
        self.update_busy()

    def fail_all(self, error: dict) -> None:
        """Drop every request sent or queued; those someone waits for fail with `error`."""
        doomed = [r for r in list(self.inflight.values()) + self.queue if not r.internal and not r.stale]
        self.inflight.clear()
        self.queue.clear()
        self.update_busy()
        for r in doomed:
            self.failed.emit(r.id, r.cmd, dict(error))

    def describe(self, req: Request) -> str:
        """"`step` (FuseTIR)" — the command and, when known, the pass or stage it was in."""
        detail = ""
        if req.cmd == "step" and self.state:
            planned = self.state.get("planned") or []
            steps = self.state.get("steps") or []
            cursor = self.state.get("cursor", 0)
            if steps and cursor < len(steps) - 1:
                detail = steps[cursor + 1].get("pass", "")
            elif planned:
                detail = planned[0].get("name", "")
        if not detail:
            detail = req.progress_pass or req.progress_text
        if not detail:
            for key in ("spec", "step", "name", "index"):
                if key in req.args:
                    detail = f"{key} {req.args[key]}"
                    break
        return f"`{req.cmd}` ({detail})" if detail else f"`{req.cmd}`"

    def what_died(self, req: Request) -> dict | None:
        """write_repro's arguments for a request that killed the engine inside a pass or a build."""
        if req.cmd in ("step", "jump", "run_to_end", "remeasure"):
            name = req.progress_pass
            if not name and req.cmd == "step" and self.state:
                steps, cursor = self.state.get("steps") or [], self.state.get("cursor", 0)
                planned = self.state.get("planned") or []
                name = (steps[cursor + 1].get("pass", "") if cursor < len(steps) - 1 else
                        planned[0].get("name", "") if planned else "")
            return {"stage": "pass", "pass_name": name} if name else None
        if req.cmd == "build_run":
            return {"stage": "build", "step": req.args.get("step")}
        return None

    def update_busy(self) -> None:
        busy = bool(self.inflight or self.queue or self._hooks.restarting())
        if busy != self._busy:
            self._busy = busy
            self.busyChanged.emit(busy)
        if not busy:
            self._hooks.on_idle()
