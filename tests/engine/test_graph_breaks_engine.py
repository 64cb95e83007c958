"""The app's engine on a model that nothing captures whole: `open` cuts it at torch.compile's
graph breaks and opens one graph as a model of its own; `choose_graph` opens another; views,
steps and Build & Run work on the chosen graph; a model that fails every capture gets one message
listing each try, and the open session stays."""
from __future__ import annotations

import json
import textwrap

import pytest

pytest.importorskip("tvm")

import irviz.engine as engine_mod

# Two Python sorts of the rows by their sums: torch.export cannot trace a sort of Python numbers
# (and no other whole-model capture gives eager torch's order), so torch.compile cuts the model
# into three graphs.
TWO_SORTS = textwrap.dedent('''
    import torch


    class TwoSorts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a = torch.nn.Linear(4, 6)
            self.b = torch.nn.Linear(6, 6)
            self.c = torch.nn.Linear(6, 3)

        def forward(self, x):
            y = self.a(x).relu()
            order = sorted(range(y.shape[0]), key=y.sum(1).tolist().__getitem__)
            z = self.b(y[order]).tanh()
            order = sorted(range(z.shape[0]), key=z.sum(1).tolist().__getitem__, reverse=True)
            return self.c(z[order] * 2.0)


    def get_model():
        return TwoSorts().eval(), (torch.randn(8, 4),)
''')

# The same sort, but torch.compile is told to leave forward() alone: no graph to cut either.
UNSPLITTABLE = textwrap.dedent('''
    import torch


    class Unsplittable(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a = torch.nn.Linear(4, 4)

        @torch._dynamo.disable
        def forward(self, x):
            y = self.a(x)
            order = sorted(range(y.shape[0]), key=y.sum(1).tolist().__getitem__)
            return y[order].relu()


    def get_model():
        return Unsplittable().eval(), (torch.randn(8, 4),)
''')


class _Chan:
    def __init__(self):
        self.sent = []

    def send(self, msg):
        json.dumps(msg)
        self.sent.append(msg)


def _call(e, cmd, **args):
    reply = e.handle({"id": 1, "cmd": cmd, "args": args})
    json.dumps(reply, allow_nan=False)  # strict JSON, as on the wire
    return reply


@pytest.fixture(scope="module")
def opened(tmp_path_factory):
    d = tmp_path_factory.mktemp("graph_breaks")
    (d / "two_sorts.py").write_text(TWO_SORTS)
    (d / "unsplittable.py").write_text(UNSPLITTABLE)
    e = engine_mod.Engine(_Chan())
    reply = _call(e, "open", spec=str(d / "two_sorts.py"))
    return e, reply, d


def test_open_falls_back_to_graph_breaks_and_says_so(opened):
    e, reply, d = opened
    assert reply["ok"], reply
    st = reply["result"]
    assert st["capture_fallback"] == "graph breaks"
    assert st["capture_notes"][0].startswith("captured with graph breaks as separate subgraphs (3 graphs")
    assert "torch.export (non-strict): data-dependent guard" in st["capture_notes"][0]
    gb = st["graph_breaks"]
    assert (gb["graph"], gb["count"]) == (1, 3)
    assert [g["graph"] for g in gb["graphs"]] == [1, 2, 3]
    assert all(g["ops"] > 0 for g in gb["graphs"])
    assert gb["graphs"][0]["inputs"] == ["8×4 float32"] and gb["graphs"][1]["inputs"] == ["8×6 float32"]
    assert st["model"] == "two_sorts graph 1 of 3" and st["spec"] == str(d / "two_sorts.py")


def test_choose_the_second_graph_step_view_and_run(opened):
    e, _, _ = opened
    first_fx = _call(e, "fx_graph")["result"]
    reply = _call(e, "choose_graph", graph=2)
    assert reply["ok"], reply
    st = reply["result"]
    assert st["model"] == "two_sorts graph 2 of 3" and st["graph_breaks"]["graph"] == 2
    assert st["cursor"] == 0 and [p["name"] for p in st["planned"]][:1] == ["LegalizeOps"]
    fx = _call(e, "fx_graph")["result"]
    # graph 2 starts from the sorted rows: its input is 8x6, graph 1's was 8x4
    shapes = lambda g: [n.get("shapes") for n in g["nodes"] if n.get("op") == "placeholder"]
    assert [[8, 6]] in shapes(fx) and [[8, 4]] in shapes(first_fx)
    st = _call(e, "step")["result"]
    assert st["cursor"] == 1 and st["steps"][1]["pass"] == "LegalizeOps" and st["tir_functions"]
    diff = _call(e, "diff")["result"]
    assert any(f["status"] == "added" for f in diff["functions"])
    assert "R.call_tir" in _call(e, "function_text", name="main")["result"]["text"]
    run = _call(e, "build_run", repeats=1)["result"]
    assert run["ok"] and run["allclose"] and run["max_abs_error"] < 1e-5
    assert run["reference"] and run["reference_name"] == "PyTorch on graph 2 of 3 (its own captured inputs)"


def test_a_graph_out_of_range_changes_nothing(opened):
    e, _, _ = opened
    before = _call(e, "state")["result"]
    reply = _call(e, "choose_graph", graph=4)
    assert not reply["ok"] and "graphs 1..3" in reply["error"]["message"]
    assert reply["state"]["model"] == before["model"] and reply["state"]["cursor"] == before["cursor"]


def test_replay_opens_the_same_graph(opened):
    _, _, d = opened
    e = engine_mod.Engine(_Chan())
    reply = _call(e, "replay", spec=str(d / "two_sorts.py"), applied=["LegalizeOps"], graph=3)
    assert reply["ok"], reply
    st = reply["result"]
    assert st["model"] == "two_sorts graph 3 of 3" and st["cursor"] == 1


def test_nothing_captures_it_one_message_and_the_session_stays(opened):
    e, _, d = opened
    before = _call(e, "state")["result"]
    reply = _call(e, "open", spec=str(d / "unsplittable.py"))
    assert not reply["ok"]
    err = reply["error"]
    assert err["stage"] == "capture"
    lines = err["message"].splitlines()
    assert "neither could irviz's fallbacks" in lines[0]
    tried = [ln.strip() for ln in lines[1:]]
    assert [t.split(". ", 1)[1].split(":")[0] for t in tried] == [
        "torch.export (non-strict)", "torch.export with eager branch values", "draft export",
        "symbolic_trace", "graph breaks as separate subgraphs"]
    assert "unsplittable.py:14 `order = sorted(" in tried[0]  # the guard's source line
    assert "torch.compile made no graph" in tried[-1]
    assert err["hint"]
    after = reply.get("state") or _call(e, "state")["result"]
    assert after["model"] == before["model"] and after["graph_breaks"] == before["graph_breaks"]


def test_a_model_captured_whole_has_no_graphs_to_choose():
    e = engine_mod.Engine(_Chan())
    st = _call(e, "open", spec="sample:mul_add")["result"]
    assert st["graph_breaks"] is None and st["capture_fallback"] is None and st["capture_notes"] == []
    reply = _call(e, "choose_graph", graph=1)
    assert not reply["ok"] and "captured whole" in reply["error"]["message"]
    assert reply["state"]["model"] == st["model"]
