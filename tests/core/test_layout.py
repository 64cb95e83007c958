"""Layered layout: geometry invariants, grouping, folding (no Qt)."""
from __future__ import annotations

import random
import subprocess
import sys

import networkx as nx
import pytest

from irviz.core.views.layout import GROUP_PREFIX, choose_fold_depth, fold_by_group, layout_graph


def random_dag(n: int = 120, seed: int = 1) -> nx.DiGraph:
    rng = random.Random(seed)
    G = nx.DiGraph()
    for i in range(n):
        kind = "param" if i and rng.random() < 0.2 else "op"
        G.add_node(f"n{i}", label=rng.choice(["conv2d", "relu", "add", "matmul"]), kind=kind,
                   shape=(1, 64, 8, 8), module_path=f"block{i // 20}.sub{(i // 5) % 4}")
    for i in range(1, n):
        if G.nodes[f"n{i}"]["kind"] == "param":
            continue
        for j in rng.sample(range(max(0, i - 8), i), k=min(i, rng.choice([1, 1, 2, 3]))):
            G.add_edge(f"n{j}", f"n{i}")
    return G


def boxes_overlap(a: dict, b: dict) -> bool:
    return (a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"]
            and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"])


@pytest.mark.parametrize("group_attr", [None, "module_path"])
def test_layout_geometry(group_attr):
    G = random_dag()
    g = layout_graph(G, group_attr=group_attr)
    assert len(g["nodes"]) == G.number_of_nodes()
    assert {n["id"] for n in g["nodes"]} == {str(v) for v in G.nodes}
    assert len(g["edges"]) == G.number_of_edges()
    nodes = {n["id"]: n for n in g["nodes"]}
    # no two boxes overlap within a layer (nor anywhere)
    by_layer: dict[int, list[dict]] = {}
    for n in g["nodes"]:
        assert n["w"] > 0 and n["h"] > 0 and n["x"] >= 0 and n["y"] >= 0
        by_layer.setdefault(n["layer"], []).append(n)
    for lay in by_layer.values():
        lay.sort(key=lambda n: n["x"])
        for a, b in zip(lay, lay[1:]):
            assert a["x"] + a["w"] <= b["x"] + 0.01, (a["id"], b["id"])
            assert a["y"] == pytest.approx(b["y"], abs=8)
    all_nodes = g["nodes"]
    for i, a in enumerate(all_nodes):
        for b in all_nodes[i + 1:]:
            assert not boxes_overlap(a, b), (a["id"], b["id"])
    # every edge goes downward, starts at the bottom of src and ends at the top of dst
    for e in g["edges"]:
        s, d, pts = nodes[e["src"]], nodes[e["dst"]], e["points"]
        assert len(pts) >= 2
        assert d["y"] > s["y"] + s["h"] - 0.01
        assert pts[0][1] == pytest.approx(s["y"] + s["h"], abs=0.2)
        assert pts[-1][1] == pytest.approx(d["y"], abs=0.2)
        assert all(p[1] < q[1] for p, q in zip(pts, pts[1:]))
        assert s["x"] - 0.5 <= pts[0][0] <= s["x"] + s["w"] + 0.5
        assert d["x"] - 0.5 <= pts[-1][0] <= d["x"] + d["w"] + 0.5
    assert g["width"] >= max(n["x"] + n["w"] for n in all_nodes)
    assert g["height"] >= max(n["y"] + n["h"] for n in all_nodes)


def test_weights_sit_next_to_their_consumer():
    # a long chain with a weight feeding the last op: the weight must not sit in the top row
    G = nx.DiGraph()
    for i in range(10):
        G.add_node(f"op{i}", kind="op")
        if i:
            G.add_edge(f"op{i-1}", f"op{i}")
    G.add_node("w", kind="param")
    G.add_edge("w", "op9")
    G.add_node("wt", kind="op", label="permute_dims")   # weight -> transpose -> consumer
    G.add_node("w2", kind="param")
    G.add_edge("w2", "wt")
    G.add_edge("wt", "op7")
    g = layout_graph(G)
    layer = {n["id"]: n["layer"] for n in g["nodes"]}
    assert layer["w"] == layer["op9"] - 1
    assert layer["wt"] == layer["op7"] - 1 and layer["w2"] == layer["op7"] - 2


def block_dag(blocks: int = 4) -> nx.DiGraph:
    """Residual blocks in sequence, each block.k = conv (+weight) -> relu -> conv -> add."""
    G = nx.DiGraph()
    G.add_node("x", kind="input")
    prev = "x"
    for b in range(blocks):
        m = f"layer.{b}"
        for name, kind, mod in [("w1", "param", f"{m}.conv1"), ("c1", "op", f"{m}.conv1"),
                                ("r", "op", f"{m}.relu"), ("w2", "param", f"{m}.conv2"),
                                ("c2", "op", f"{m}.conv2"), ("add", "op", m)]:
            G.add_node(f"{m}.{name}", kind=kind, label=name, module_path=mod)
        G.add_edges_from([(prev, f"{m}.c1"), (f"{m}.w1", f"{m}.c1"), (f"{m}.c1", f"{m}.r"),
                          (f"{m}.r", f"{m}.c2"), (f"{m}.w2", f"{m}.c2"), (f"{m}.c2", f"{m}.add"),
                          (prev, f"{m}.add")])
        prev = f"{m}.add"
    G.add_node("out", kind="output")
    G.add_edge(prev, "out")
    return G


@pytest.mark.parametrize("make", [block_dag, random_dag])
def test_groups_contain_their_members(make):
    G = make()
    g = layout_graph(G, group_attr="module_path")
    if make is block_dag:
        assert {grp["id"] for grp in g["groups"]} == {"layer", "layer.0", "layer.1", "layer.2",
                                                      "layer.3"}
        assert {grp["parent"] for grp in g["groups"]} == {None, "layer"}
    nodes = {n["id"]: n for n in g["nodes"]}
    for grp in g["groups"]:
        assert grp["id"] == grp["label"]
        for m in grp["members"]:
            n = nodes[m]
            assert G.nodes[m]["module_path"].startswith(grp["id"])
            if n["kind"] == "param":
                continue       # weights are not inside frames by design
            assert grp["x"] <= n["x"] and n["x"] + n["w"] <= grp["x"] + grp["w"]
            assert grp["y"] <= n["y"] and n["y"] + n["h"] <= grp["y"] + grp["h"]


def test_cycles_do_not_break_layout():
    G = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "d")])
    g = layout_graph(G)
    assert len(g["nodes"]) == 4 and len(g["edges"]) == 5


def test_empty_graph():
    g = layout_graph(nx.DiGraph())
    assert g["nodes"] == [] and g["edges"] == [] and g["groups"] == []


def test_fold_by_group_merges_nodes_and_edges():
    G = random_dag(100)
    F = fold_by_group(G, "module_path", folded=["block1", "block2"])
    assert F.number_of_nodes() < G.number_of_nodes()
    summary = F.nodes[GROUP_PREFIX + "block1"]
    assert summary["kind"] == "group" and summary["group_id"] == "block1"
    assert summary["count"] == sum(1 for _, d in G.nodes(data=True)
                                   if d["module_path"].startswith("block1."))
    # edges merged: no edge inside a folded group, parallel edges become one with a count
    assert not F.has_edge(GROUP_PREFIX + "block1", GROUP_PREFIX + "block1")
    crossing = [(u, v) for u, v in G.edges
                if G.nodes[u]["module_path"].startswith("block1.")
                and G.nodes[v]["module_path"].startswith("block2.")]
    if crossing:
        assert F.has_edge(GROUP_PREFIX + "block1", GROUP_PREFIX + "block2")
        assert F[GROUP_PREFIX + "block1"][GROUP_PREFIX + "block2"].get("count", 1) == len(crossing)
    assert nx.is_directed_acyclic_graph(F)


def test_fold_depth_and_layout_of_folded():
    G = random_dag(100)
    F = fold_by_group(G, "module_path", depth=1)
    assert F.number_of_nodes() <= 5 + sum(1 for _, d in G.nodes(data=True) if not d["module_path"])
    g = layout_graph(G, group_attr="module_path", folded=["block0"])
    ids = {n["id"] for n in g["nodes"]}
    assert GROUP_PREFIX + "block0" in ids
    assert len(ids) < G.number_of_nodes()
    assert g["folded"] == ["block0"]
    assert choose_fold_depth(G, max_nodes=1000) is None
    d = choose_fold_depth(G, max_nodes=30)
    assert d is not None and fold_by_group(G, depth=d).number_of_nodes() <= 30


def test_fx_style_attrs_give_labels():
    G = nx.DiGraph()
    G.add_node("conv2d", target="aten.conv2d.default", kind="op", shapes=[(1, 64, 56, 56)],
               dtypes=["float32"])
    G.add_node("x", target="x", kind="input", shapes=[(1, 3, 224, 224)], dtypes=["float32"])
    G.add_edge("x", "conv2d", shape=(1, 3, 224, 224))
    g = layout_graph(G)
    nodes = {n["id"]: n for n in g["nodes"]}
    assert nodes["conv2d"]["label"] == "conv2d"
    assert nodes["conv2d"]["sublabel"] == "1×64×56×56 float32"
    assert nodes["x"]["label"] == "x"
    assert g["edges"][0]["label"] == "1×3×224×224"


def test_core_layout_does_not_import_qt():
    code = "import sys, irviz.core.views.layout; assert not any(m.startswith('PySide6') for m in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_fold_helpers_round_trip():
    from irviz.core.views.layout import groups_at_depth, toggle_fold
    G = block_dag()
    folded = groups_at_depth(G, "module_path", 2)
    assert folded == {"layer.0", "layer.1", "layer.2", "layer.3"}
    assert (fold_by_group(G, "module_path", folded=folded).number_of_nodes()
            == fold_by_group(G, "module_path", depth=2).number_of_nodes())
    unfolded = toggle_fold(folded, "layer.1")
    assert unfolded == {"layer.0", "layer.2", "layer.3"}
    assert toggle_fold(unfolded, "layer") == {"layer"}
    g = layout_graph(G, group_attr="module_path", folded=unfolded)
    ids = {n["id"] for n in g["nodes"]}
    assert "group:layer.0" in ids and "group:layer.1" not in ids and "layer.1.c1" in ids
    summary = next(n for n in g["nodes"] if n["id"] == "group:layer.0")
    assert summary["group_id"] == "layer.0" and summary["count"] == 6
    assert summary["sublabel"] == "4 ops · 6 nodes"


def test_isolated_nodes_go_below_the_graph():
    G = block_dag(2)
    for i in range(30):
        G.add_node(f"unused{i}", kind="buffer", label=f"num_batches_tracked_{i}")
    g = layout_graph(G, group_attr="module_path")
    nodes = {n["id"]: n for n in g["nodes"]}
    bottom = max(n["y"] + n["h"] for k, n in nodes.items() if not k.startswith("unused"))
    assert all(nodes[f"unused{i}"]["y"] > bottom for i in range(30))
    assert nodes["x"]["layer"] == 0
    rows = {nodes[f"unused{i}"]["layer"] for i in range(30)}
    assert len(rows) >= 3       # wrapped into rows, not one very wide row


def called_twice_graph() -> nx.DiGraph:
    """One fused function (group "f") called twice, with other ops in between."""
    G = nx.DiGraph()
    chain = [("a", None), ("f1", "f"), ("f2", "f"), ("b", None), ("c", None), ("f3", "f"),
             ("f4", "f"), ("d", None)]
    for name, grp in chain:
        G.add_node(name, kind="call_tir", group=grp)
    G.add_edges_from(zip([c[0] for c in chain], [c[0] for c in chain[1:]]))
    return G


def test_group_called_at_two_places_gets_two_frames():
    g = layout_graph(called_twice_graph(), group_attr="group")
    frames = {grp["id"]: grp for grp in g["groups"]}
    assert set(frames) == {"f", "f#2"}
    assert frames["f"]["members"] == ["f1", "f2"] and frames["f#2"]["members"] == ["f3", "f4"]
    assert all(grp["fold_id"] == "f" and grp["label"] == "f" for grp in frames.values())
    nodes = {n["id"]: n for n in g["nodes"]}
    for name in ("b", "c"):   # the ops between the calls are outside both frames
        n = nodes[name]
        for grp in frames.values():
            assert not (grp["y"] <= n["y"] and n["y"] + n["h"] <= grp["y"] + grp["h"])


def test_fold_absorbs_weights_used_only_inside_the_group():
    G = block_dag(2)
    G.add_node("p_shared", kind="parameter")        # FX parameters have no module path
    G.add_edge("p_shared", "layer.0.c2")
    G.add_node("p_both", kind="parameter")
    G.add_edges_from([("p_both", "layer.0.c1"), ("p_both", "layer.1.c1")])
    F = fold_by_group(G, "module_path", folded=["layer.0"])
    assert "p_shared" not in F and "p_shared" in F.nodes["group:layer.0"]["members"]
    assert "p_both" in F          # used by two groups: stays visible


def transformer_like_graph(blocks: int = 3) -> nx.DiGraph:
    """Blocks under one outer module whose frame cannot be honest: a node with no module path
    (as torch.export leaves between blocks) sits in its column; a mask built once is used by
    every block."""
    G = nx.DiGraph()
    G.add_node("input_ids", kind="input")
    G.add_node("mask", target="aten.triu.default", module_path="model")
    G.add_node("embed", target="aten.embedding.default", module_path="model.wte")
    G.add_edge("input_ids", "embed")
    G.add_edge("input_ids", "mask")
    prev = "embed"
    for b in range(blocks):
        p = f"model.h.{b}"
        for name in ("ln", "qkv", "softmax", "proj", "add"):
            G.add_node(f"{p}.{name}", target=f"aten.{name}.default", module_path=f"{p}.attn"
                       if name in ("qkv", "softmax", "proj") else p)
        G.add_edges_from([(prev, f"{p}.ln"), (f"{p}.ln", f"{p}.qkv"), (f"{p}.qkv", f"{p}.softmax"),
                          ("mask", f"{p}.softmax"), (f"{p}.softmax", f"{p}.proj"),
                          (f"{p}.proj", f"{p}.add"), (prev, f"{p}.add")])
        prev = f"{p}.add"
        if b == 0:
            G.add_node("cast", target="aten._to_copy.default")
            G.add_edge(prev, "cast")
            prev = "cast"
    G.add_node("out", kind="output")
    G.add_edges_from([(prev, "out"), ("input_ids", "out")])
    return G


def test_blocks_keep_their_frames_when_the_outer_frame_is_dropped():
    g = layout_graph(transformer_like_graph(), group_attr="module_path")
    ids = {grp["id"] for grp in g["groups"]}
    assert "model" not in ids            # it would enclose "cast"
    assert {"model.h.1", "model.h.2", "model.h.1.attn", "model.h.2.attn"} <= ids
    nodes = {n["id"]: n for n in g["nodes"]}
    for grp in g["groups"]:
        inside = [n for n in nodes.values() if grp["x"] < n["x"] + n["w"] / 2 < grp["x"] + grp["w"]
                  and grp["y"] < n["y"] + n["h"] / 2 < grp["y"] + grp["h"]]
        assert all((n.get("module_path") or "").startswith(grp["id"]) for n in inside), grp["id"]


def test_a_long_edge_keeps_its_bends_not_a_point_per_layer():
    # a residual stream: x feeds the add 40 layers down (an LLM's skip connections span its layers)
    G = nx.DiGraph()
    G.add_node("x", kind="input")
    prev = "x"
    for i in range(40):
        G.add_node(f"op{i}", kind="op")
        G.add_edge(prev, f"op{i}")
        prev = f"op{i}"
    G.add_node("add", kind="op")
    G.add_edge(prev, "add")
    G.add_edge("x", "add")
    g = layout_graph(G)
    for e in g["edges"]:
        pts = e["points"]
        # no point inside a vertical run: it would be drawn the same without it
        assert not any(a[0] == b[0] == c[0] for a, b, c in zip(pts, pts[1:], pts[2:])), pts
    skip = next(e for e in g["edges"] if (e["src"], e["dst"]) == ("x", "add"))
    nodes = {n["id"]: n for n in g["nodes"]}
    assert 2 <= len(skip["points"]) <= 6
    assert skip["points"][0][1] == pytest.approx(nodes["x"]["y"] + nodes["x"]["h"], abs=0.2)
    assert skip["points"][-1][1] == pytest.approx(nodes["add"]["y"], abs=0.2)
