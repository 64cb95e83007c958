"""Bookkeeping nodes (asserts, copies of lifted constants, aliases, scalar constants) are left out
of the graphs by default; the rest of the graph stays connected through them."""
from __future__ import annotations

import networkx as nx

from irviz.core.views.bookkeeping import without_bookkeeping
from irviz.core.views.layout import layout_graph


def fx_like() -> nx.DiGraph:
    G = nx.DiGraph()
    G.add_node("x", kind="input", op="placeholder", target="x")
    G.add_node("c_mask", kind="constant", op="placeholder", target="c_mask")
    G.add_node("clone", kind="op", target="aten.clone.default")            # of a lifted constant
    G.add_node("check", kind="op", target="aten._assert_tensor_metadata.default")
    G.add_node("xc", kind="op", target="aten.clone.default")               # of an activation
    G.add_node("mul", kind="op", target="aten.mul.Tensor")
    G.add_node("out", kind="output")
    G.add_edges_from([("c_mask", "clone"), ("x", "check"), ("x", "xc"), ("xc", "mul"),
                      ("clone", "mul", {"shape": (4,)}), ("mul", "out")])
    return G


def test_fx_asserts_and_copies_of_constants_are_left_out():
    H, hidden = without_bookkeeping(fx_like(), "fx")
    assert sorted(hidden) == ["check", "clone"]
    assert "xc" in H                                  # a clone of an activation is computation
    assert H.has_edge("c_mask", "mul") and H.edges["c_mask", "mul"]["shape"] == (4,)
    g = layout_graph(H)
    assert {n["id"] for n in g["nodes"]} == {"x", "c_mask", "xc", "mul", "out"}


def test_the_node_an_import_failed_at_is_never_hidden():
    _, hidden = without_bookkeeping(fx_like(), "fx", keep=["clone"])
    assert hidden == ["check"]


def test_relax_aliases_and_scalar_constants_are_left_out():
    G = nx.DiGraph()
    G.add_node("x", kind="param", op="param")
    G.add_node("const0", kind="const", op="const", shape=())
    G.add_node("w", kind="const", op="const", shape=(4, 4))
    G.add_node("lv", kind="op", op="relax.add")
    G.add_node("lv1", kind="op", op="relax.matmul")
    G.add_node("gv", kind="op", op="alias")
    G.add_node("output", kind="output", op="output")
    G.add_edges_from([("x", "lv"), ("const0", "lv"), ("lv", "lv1"), ("w", "lv1"), ("lv1", "gv"),
                      ("gv", "output")])
    H, hidden = without_bookkeeping(G, "relax")
    assert sorted(hidden) == ["const0", "gv"]
    assert H.has_edge("lv1", "output") and "w" in H


def test_nothing_to_hide_returns_the_same_graph():
    G = nx.DiGraph([("a", "b")])
    H, hidden = without_bookkeeping(G, "fx")
    assert H is G and hidden == []
