"""The whole layout of a small graph, pinned: any change to placement, routing or frames shows.

The graph touches every phase: nested groups, weights that sink beside their consumer, a long
edge (dummy bends), a cycle (a reversed edge), isolated nodes, and one group called at two
places (split frames).  Regenerate the expected file only for an intended layout change:
``python3 tests/core/test_layout_pinned.py --write``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import networkx as nx

from irviz.core.views.layout import layout_graph

sys.path.insert(0, str(Path(__file__).parent))
from test_layout import called_twice_graph

EXPECTED = Path(__file__).parent / "data" / "layout_pinned.json"


def pinned_graph(cycle: bool = True) -> nx.DiGraph:
    G = nx.DiGraph()
    G.add_node("x", kind="input", shape=(1, 3, 8, 8), dtype="float32")
    for b in range(2):
        p = f"layer.{b}"
        G.add_node(f"{p}.w", kind="param", shape=(8, 3, 3, 3), module_path=f"{p}.conv")
        G.add_node(f"{p}.wt", target="aten.permute.default")
        G.add_node(f"{p}.conv", target="aten.conv2d.default", shape=(1, 8, 8, 8),
                   module_path=f"{p}.conv")
        G.add_node(f"{p}.bias", target="aten.add.Tensor", module_path=f"{p}.conv")
        G.add_node(f"{p}.bn", target="aten.batch_norm.default", module_path=f"{p}.bn")
        G.add_node(f"{p}.relu", label="relu", sublabel="1×8×8×8 float32", module_path=p)
        G.add_node(f"{p}.add", target="aten.add.Tensor", module_path=p)
        G.add_edges_from([(f"{p}.w", f"{p}.wt"), (f"{p}.wt", f"{p}.conv"),
                          (f"{p}.conv", f"{p}.bias"),
                          (f"{p}.bias", f"{p}.bn"), (f"{p}.bn", f"{p}.relu"),
                          (f"{p}.relu", f"{p}.add")])
    G.add_edges_from([("x", "layer.0.conv"), ("layer.0.bn", "layer.0.add"), ("layer.0.add", "layer.1.conv"),
                      ("layer.0.add", "layer.1.add", {"label": "skip"})])
    G.add_node("out", kind="output")
    G.add_edge("layer.1.add", "out", shape=(1, 8, 8, 8))
    if cycle:
        G.add_edges_from([("out", "layer.1.relu"),        # a cycle: drawn as a reversed edge
                          ("x", "layer.1.bn")])
    for i in range(3):
        G.add_node(f"unused{i}", kind="buffer", label=f"num_batches_tracked_{i}")
    return G


def layouts() -> dict:
    return {
        "flat": layout_graph(pinned_graph()),
        "grouped": layout_graph(pinned_graph(cycle=False), group_attr="module_path"),
        "grouped_cycle": layout_graph(pinned_graph(), group_attr="module_path"),
        "folded": layout_graph(pinned_graph(cycle=False), group_attr="module_path",
                               folded=["layer.0"]),
        "called_twice": layout_graph(called_twice_graph(), group_attr="group"),
    }


def _plain(obj):
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


def test_layout_output_is_unchanged():
    assert _plain(layouts()) == json.loads(EXPECTED.read_text())


if __name__ == "__main__" and "--write" in sys.argv:
    EXPECTED.write_text(json.dumps(_plain(layouts()), sort_keys=True, indent=1) + "\n")
