"""The request loop of `python -m irviz.engine`: one request per line on stdin; replies, progress
and events on stdout; logs on stderr (docs/engine_protocol.md).

- stdout carries only protocol lines. At startup the real stdout fd is duplicated for the protocol
  and fd 1 is pointed at stderr, so stray prints from torch, TVM or LLVM (Python or C) land in the log.
- Every command runs inside try/except: an exception becomes an error reply and the loop goes on
  (a segfault in TVM still kills it: the GUI's bridge restarts the engine and replays).
- A reader thread queues incoming lines, so a request that carries a `group` is answered with a
  `superseded` error, without running, when a newer request of the same group is already waiting.
"""
from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading
from collections import deque

from irviz.protocol import commands as protocol
from irviz.engine.catalogue_commands import prewarm
from irviz.engine.dispatch import Engine
from irviz.protocol.commands import error_dict
from irviz.protocol.parts import reply_lines


class Channel:
    """Writes protocol lines to the real stdout (a dup of fd 1 taken before redirecting it); a big
    reply goes in parts (:mod:`irviz.protocol.parts`), written together."""

    def __init__(self, stream):
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, obj) -> None:
        lines = reply_lines(obj, _dumps) if isinstance(obj, dict) else [_dumps(obj)]
        with self._lock:
            for line in lines:
                self._stream.write(line + "\n")
            self._stream.flush()


def _dumps(obj) -> str:
    return json.dumps(obj, default=protocol.json_default, allow_nan=False)


def _redirect_stdout():
    """Keep the real stdout for the protocol; send everything else written to fd 1 to stderr."""
    sys.stdout.flush()
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    proto = os.fdopen(proto_fd, "w", encoding="utf-8", buffering=1)
    sys.stdout = os.fdopen(os.dup(2), "w", encoding="utf-8", buffering=1)
    return proto


def main(argv=None) -> int:
    proto = _redirect_stdout()
    faulthandler.enable(file=sys.stderr)  # a TVM segfault leaves a Python traceback in the log
    # Ctrl-C in the terminal that started the GUI reaches the whole process group: the GUI decides.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    channel = Channel(proto)
    engine = Engine(channel)
    pending: deque = deque()
    cond = threading.Condition()
    eof = [False]

    def reader():
        for raw in sys.stdin.buffer:
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            with cond:
                pending.append(line)
                cond.notify()
        with cond:
            eof[0] = True
            cond.notify()

    threading.Thread(target=reader, name="irviz-engine-stdin", daemon=True).start()
    if os.environ.get("IRVIZ_ENGINE_NO_PREWARM") != "1":
        threading.Thread(target=prewarm, name="irviz-engine-prewarm", daemon=True).start()
    channel.send({"event": "ready", "pid": os.getpid()})

    while True:
        with cond:
            while not pending and not eof[0]:
                cond.wait()
            if not pending:
                break
            line = pending.popleft()
            waiting = list(pending)
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("a request is a JSON object")
        except ValueError as exc:
            channel.send({"id": None, "ok": False,
                          "error": {"stage": "request", "message": f"Bad request line: {exc}",
                                    "hint": "send one JSON object per line", "detail": line[:2000]}})
            continue
        group = req.get("group")
        if group is not None and _superseded(group, waiting):
            channel.send({"id": req.get("id"), "ok": False,
                          "error": {"stage": "superseded", "message": "Superseded by a newer request",
                                    "hint": None, "detail": None}})
            continue
        if req.get("cmd") == "shutdown":
            channel.send({"id": req.get("id"), "ok": True, "result": None})
            break
        reply = engine.handle(req)
        try:
            channel.send(reply)
        except (TypeError, ValueError) as exc:  # an unserializable result still gets an answer
            channel.send({"id": req.get("id"), "ok": False, "error": error_dict(exc, req.get("cmd", ""))})
    return 0


def _superseded(group, waiting_lines) -> bool:
    for line in waiting_lines:
        try:
            other = json.loads(line)
        except ValueError:
            continue
        if isinstance(other, dict) and other.get("group") == group:
            return True
    return False

