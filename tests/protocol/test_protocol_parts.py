"""Big replies in parts (irviz.protocol.parts): every line stays small, and the joiner gives back the
very reply that was split, once."""
from __future__ import annotations

import json

from irviz.protocol.parts import PART_BYTES, PartJoiner, reply_lines


def big_graph(n: int = 5000) -> dict:
    nodes = [{"id": f"lv{k}", "label": "matmul", "shape": [1, 128, 4096], "x": k * 1.5, "y": 40.0 * k,
              "w": 340.0, "h": 40.0, "sublabel": "1×128×4096 float32"} for k in range(n)]
    edges = [{"src": f"lv{k}", "dst": f"lv{k + 1}", "label": "1×128×4096",
              "points": [[k * 1.5, 40.0 * k + 40], [k * 1.5, 40.0 * k + 80]]} for k in range(n - 1)]
    return {"nodes": nodes, "edges": edges, "groups": [], "width": 5000.0, "height": 40.0 * n,
            "folded": [], "hidden_bookkeeping": ["c0", "c1"]}


def join(lines: list[str]) -> list[dict]:
    joiner, out = PartJoiner(), []
    for line in lines:
        msg = joiner.feed(json.loads(line))
        if msg is not None:
            out.append(msg)
    assert not joiner.pending()
    return out


def test_a_big_reply_goes_in_small_parts_and_comes_back_identical():
    msg = {"id": 7, "ok": True, "result": big_graph()}
    whole = json.dumps(msg)
    assert len(whole) > 4 * PART_BYTES
    lines = reply_lines(msg)
    assert len(lines) >= 5
    # each line is about a part's size (one item may overshoot it) and holds no newline
    assert max(len(line) for line in lines) <= PART_BYTES + 1000
    assert all("\n" not in line for line in lines)
    head = json.loads(lines[0])
    assert head["parts"] == len(lines) - 1 and head["result"]["nodes"] == [] and head["result"]["edges"] == []
    assert head["result"]["hidden_bookkeeping"] == ["c0", "c1"]   # small values stay in the head
    assert [json.loads(line)["part"] for line in lines[1:]] == list(range(1, len(lines)))
    (back,) = join(lines)
    assert back == msg
    assert json.dumps(back) == whole       # the same keys in the same order


def test_a_long_text_is_cut_and_joined_and_small_or_failed_replies_stay_one_line():
    text = "".join(f'    lv{k} = R.call_tir(cls.fused_matmul, (x, "w\\u00e9"), out_sinfo=R.Tensor((1,)))\n'
                   for k in range(20000))
    msg = {"id": "a", "ok": True, "result": {"name": "main", "text": text}}
    lines = reply_lines(msg, part_bytes=100_000)
    assert len(lines) > 10
    assert join(lines) == [msg]
    small = {"id": 1, "ok": True, "result": {"nodes": [1, 2, 3]}}
    assert reply_lines(small) == [json.dumps(small)]
    failed = {"id": 2, "ok": False, "error": {"stage": "run", "message": "x" * (3 * PART_BYTES)}}
    assert reply_lines(failed) == [json.dumps(failed)]
    listed = {"id": 3, "ok": True, "result": list(range(200_000))}
    assert reply_lines(listed) == [json.dumps(listed)]


def test_an_item_bigger_than_a_part_goes_alone():
    items = ["a" * 50, "b" * 3000, "c" * 50, "d" * 50]
    msg = {"id": 1, "ok": True, "result": {"rows": items}}
    lines = reply_lines(msg, part_bytes=1000)
    assert [json.loads(line)["items"] for line in lines[1:]] == [["a" * 50], ["b" * 3000], ["c" * 50, "d" * 50]]
    assert join(lines) == [msg]


def test_the_joiner_passes_other_messages_through_and_gives_each_reply_once():
    a = reply_lines({"id": 1, "ok": True, "result": big_graph(800)}, part_bytes=20_000)
    progress = json.dumps({"id": 2, "progress": "Applying FuseOps", "fraction": 0.5})
    b = reply_lines({"id": 2, "ok": True, "result": {"text": "y" * 50_000}}, part_bytes=20_000)
    got = join([*a, progress, *b])
    assert [m["id"] for m in got] == [1, 2, 2]
    assert "progress" in got[1] and len(got[2]["result"]["text"]) == 50_000
    # a part whose head never came (an engine restarted mid-reply) is dropped, not dispatched
    assert join(a[1:]) == []
