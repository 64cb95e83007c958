"""The spare engine does not warm up beside the engine's work: on 2 cores it took the cores a
build_run's timing blocks were measuring on."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import sys

import pytest

from irviz.ui.bridge import EngineBridge

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/stat")


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_spare_is_stopped_while_the_engine_works_and_continues_when_idle(qtbot, qapp):
    # a stand-in engine that says ready and answers each request after a pause: the bridge's
    # pausing is what is tested, not the engine
    fake = ("import json, sys, time\n"
            "print(json.dumps({'event': 'ready', 'pid': 0}), flush=True)\n"
            "for line in sys.stdin:\n"
            "    req = json.loads(line)\n"
            "    time.sleep(0.5)\n"
            "    print(json.dumps({'id': req['id'], 'ok': True, 'result': {}}), flush=True)\n")
    b = EngineBridge(arguments=["-c", fake], spare=True)
    try:
        qtbot.waitUntil(lambda: b.ready, timeout=30_000)
        b._recipe = {"spec": "sample:mul_add"}       # a model is open: a spare is worth having
        b._start_spare()
        qtbot.waitUntil(lambda: b._spare is not None and b._spare.qp.processId() > 0, timeout=30_000)
        spare = int(b._spare.qp.processId())
        assert _state(spare) != "T"
        done = []
        b.replied.connect(lambda i, c, r: done.append(i))
        rid = b.request("ping")
        assert b.busy and b._spare.paused            # stopped as soon as the engine has work
        qtbot.waitUntil(lambda: _state(spare) == "T", timeout=5_000)   # signals arrive asynchronously
        qtbot.waitUntil(lambda: rid in done, timeout=30_000)
        assert not b.busy
        qtbot.waitUntil(lambda: _state(spare) != "T", timeout=5_000)   # warming again once idle
        # promoted while stopped (a restart during work): it runs again
        b.request("ping")
        qtbot.waitUntil(lambda: _state(spare) == "T", timeout=5_000)
        b.kill_engine()
        qtbot.waitUntil(lambda: b.pid == spare or b._eng is not None and b._eng.qp.processId() == spare,
                        timeout=30_000)
        assert _state(spare) != "T"
    finally:
        b.shutdown()
