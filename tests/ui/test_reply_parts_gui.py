"""The bridge reads a big reply in parts between events: an engine (here a small script) writes the
reply of a 5,000-node graph in parts; the GUI decodes them over several turns of its event loop
and hands the reply on once, identical to what was sent."""
from __future__ import annotations

import json
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QTimer

from irviz.protocol.parts import reply_lines
from irviz.ui import engine_process
from irviz.ui.bridge import EngineBridge

GRAPH = '''
def graph(n):
    nodes = [{"id": f"lv{k}", "label": "matmul", "x": 1.5 * k, "y": 40.0 * k, "w": 340.0, "h": 40.0,
              "shape": [1, 128, 4096], "sublabel": "1\\u00d7128\\u00d74096 float32"} for k in range(n)]
    edges = [{"src": f"lv{k}", "dst": f"lv{k + 1}", "label": "",
              "points": [[1.5 * k, 40.0 * k + 40], [1.5 * k, 40.0 * k + 80]]} for k in range(n - 1)]
    return {"nodes": nodes, "edges": edges, "groups": [], "width": 9000.0, "height": 40.0 * n,
            "text": "    lv = R.add(x, y)\\n" * (n * 4)}
'''

ENGINE = GRAPH + '''
import json, sys
from irviz.protocol.parts import reply_lines
print(json.dumps({"event": "ready", "pid": 1}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    out = [json.dumps({"id": req["id"], "progress": "drawing", "fraction": 0.5})]
    out += reply_lines({"id": req["id"], "ok": True, "result": graph(req["args"]["n"])},
                       part_bytes=req["args"]["part_bytes"])
    sys.stdout.write("\\n".join(out) + "\\n")
    sys.stdout.flush()
'''

_ns: dict = {}
exec(GRAPH, _ns)
graph = _ns["graph"]


@pytest.fixture
def bridge(qapp):
    b = EngineBridge(arguments=["-c", ENGINE], spare=False)
    yield b
    b.shutdown()


class Decodes:
    """Notes, for every line the bridge decodes, the turn of the event loop (a 0 ms timer counts
    them) and the call of the bridge's line reader it came in."""

    def __init__(self, monkeypatch):
        self.turn = 0
        self.call = 0
        self.seen: list[tuple[int, int]] = []     # (turn, call)
        self.timer = QTimer()
        self.timer.setInterval(0)
        self.timer.timeout.connect(self._tick)
        self.timer.start()
        real_loads, real_read = json.loads, EngineBridge._read_lines

        def loads(raw, *a, **k):
            self.seen.append((self.turn, self.call))
            return real_loads(raw, *a, **k)

        def read_lines(bridge, eng, drain=False):
            self.call += 1
            return real_read(bridge, eng, drain)

        monkeypatch.setattr(engine_process.json, "loads", loads)
        monkeypatch.setattr(EngineBridge, "_read_lines", read_lines)

    def _tick(self):
        self.turn += 1


def test_a_parted_reply_is_read_between_events_and_handed_on_once(qtbot, bridge, monkeypatch):
    replies, progress = [], []
    bridge.replied.connect(lambda rid, cmd, result: replies.append((rid, result)))
    bridge.progress.connect(lambda rid, text, frac: progress.append(text))
    qtbot.waitUntil(lambda: bridge.ready, timeout=30_000)
    monkeypatch.setattr(engine_process, "READ_BUDGET_S", 0.0)   # one line per turn
    decodes = Decodes(monkeypatch)
    rid = bridge.request("relax_graph", n=5000, part_bytes=40_000)
    qtbot.waitUntil(lambda: bool(replies) and not bridge.busy, timeout=30_000)
    qtbot.wait(50)
    decodes.timer.stop()
    assert [r for r, _ in replies] == [rid] and progress == ["drawing"]
    assert replies[0][1] == graph(5000)
    # the progress line, the head and its ~40 parts: one line per call of the reader, the calls
    # spread over many turns of the event loop
    lines = reply_lines({"id": rid, "ok": True, "result": graph(5000)}, part_bytes=40_000)
    assert len(lines) > 30 and len(decodes.seen) == 1 + len(lines)
    calls = [call for _turn, call in decodes.seen]
    assert len(set(calls)) == len(calls)
    assert len({turn for turn, _call in decodes.seen}) > len(calls) // 3


def test_with_the_usual_budget_a_parted_reply_arrives_whole(qtbot, bridge):
    replies = []
    bridge.replied.connect(lambda rid, cmd, result: replies.append((rid, result)))
    qtbot.waitUntil(lambda: bridge.ready, timeout=30_000)
    first = bridge.request("relax_graph", supersede=False, n=3000, part_bytes=30_000)
    second = bridge.request("relax_graph", supersede=False, n=10, part_bytes=30_000)
    qtbot.waitUntil(lambda: len(replies) == 2, timeout=30_000)
    assert [r for r, _ in replies] == [first, second]
    assert replies[0][1] == graph(3000) and replies[1][1] == graph(10)
