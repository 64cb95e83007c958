"""Layered top-to-bottom layout of a networkx DiGraph into the engine protocol's ``graph`` dict.

networkx only, no Qt.  One entry point, :func:`layout_graph`, so another engine (graphviz,
graphlay) can be swapped in behind it.  Algorithm (Sugiyama-style), one function per phase, called in this order by :func:`layout_graph`:

1. ``acyclic_edges``: cycles are broken by reversing DFS back edges (drawn upward);
2. ``assign_layers``: longest path from the sources, then every node with at least as many
   outgoing as incoming edges sinks to just above its first consumer (weights and side inputs
   sit beside the op that uses them instead of piling up in the top rows);
3. ``add_long_edge_bends``: edges spanning several layers get dummy nodes (their bends);
4. ``order_layers``: crossing reduction by barycenter sweeps down and up; nodes of the same
   group (module path, fused function) are kept together at every level of the path;
5. ``assign_x``: nodes are pulled towards the mean x of their neighbours, then placed with
   minimum gaps by isotonic regression (pool-adjacent-violators), alternately down and up ->
   straight spines and straight long edges; ``assign_rows``: y of each layer;
6. ``node_boxes``, ``route_edges``, ``group_frames``, ``fit_to_margin``: the protocol dicts.

Phases 1-5 live in :mod:`layout_placement`, phase 6 in :mod:`layout_output`; labels, sizes
and folding stay here.

Coordinates: ``x``, ``y`` of nodes and groups are the *top-left* corner, ``w``, ``h`` the size,
in scene pixels (y grows downward).  Edge ``points`` run from the bottom of ``src`` to the top
of ``dst`` (for an edge reversed to break a cycle they run upward).
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any
from collections.abc import Iterable

import networkx as nx

from irviz.core.views.layout_output import (
    fit_to_margin, fmt_shape, group_frames, node_boxes, route_edges,
)
from irviz.core.views.layout_placement import (
    NON_OP_KINDS, PURE_KINDS, NodeInfo, acyclic_edges, add_long_edge_bends, assign_layers,
    assign_rows, assign_x, min_separations, order_layers,
)

__all__ = [
    "layout_graph",
    "fold_by_group",
    "choose_fold_depth",
    "groups_at_depth",
    "toggle_fold",
    "node_label",
    "node_sublabel",
    "node_size",
    "GROUP_PREFIX",
]

# geometry (scene pixels); the GUI draws 11 px bold label + 9.5 px sublabel
CHAR_W = 7.4          # average advance of the label font
SUB_CHAR_W = 6.0      # average advance of the sublabel font
PAD_X = 22
MIN_W = 64
MAX_W = 340
H_TWO_LINES = 40
H_ONE_LINE = 28

GROUP_PREFIX = "group:"   # id prefix of summary nodes made by fold_by_group


# --------------------------------------------------------------------------- labels and sizes

def node_label(nid: Any, data: dict) -> str:
    """Label shown in the box: ``label`` attr, else a short op name, else the id."""
    label = data.get("label")
    if label:
        return str(label)
    target = data.get("target") or data.get("op")
    kind = data.get("kind")
    if target and kind not in ("input", "parameter", "buffer", "constant", "param", "const"):
        t = str(target)
        if t.startswith("aten."):          # aten.conv2d.default -> conv2d
            t = t.split(".")[1]
        return t
    return str(data.get("name") or nid)


def node_sublabel(data: dict) -> str:
    """Second line: ``sublabel`` attr, else the (first) output shape and dtype."""
    sub = data.get("sublabel")
    if sub is not None:
        return str(sub)
    shape = data.get("shape")
    if shape is None:
        shapes = data.get("shapes")
        if shapes:
            shape = shapes[0] if len(shapes) == 1 else shapes
    dtype = data.get("dtype")
    if dtype is None and data.get("dtypes"):
        dtype = data["dtypes"][0]
    text = fmt_shape(shape)
    if dtype and text:
        text = f"{text} {dtype}"
    return text


def node_size(label: str, sublabel: str = "") -> tuple[float, float]:
    """Box size from the text: a monospace-ish estimate of the label widths, 1 or 2 lines."""
    w = max(len(label) * CHAR_W, len(sublabel) * SUB_CHAR_W) + PAD_X
    w = float(min(MAX_W, max(MIN_W, math.ceil(w))))
    return w, float(H_TWO_LINES if sublabel else H_ONE_LINE)


# --------------------------------------------------------------------------- folding

def _group_of(data: dict, key: str | None) -> str:
    if not key:
        return ""
    g = data.get(key)
    return str(g) if g else ""


def _prefixes(path: str, sep: str = ".") -> list[str]:
    if not path:
        return []
    parts = path.split(sep)
    return [sep.join(parts[: i + 1]) for i in range(len(parts))]


def fold_by_group(
    G: nx.DiGraph,
    key: str = "module_path",
    *,
    depth: int | None = None,
    folded: Iterable[str] = (),
    sep: str = ".",
) -> nx.DiGraph:
    """Collapse groups into summary nodes.

    A node whose ``G.nodes[n][key]`` path lies in (or under) a folded group is replaced by one
    node ``"group:<path>"`` (kind ``"group"``, label = path, sublabel = "N ops", ``group_id`` =
    path, ``members`` = original ids, ``key`` = parent path).  ``depth=k`` folds every group with
    k path components; ``folded`` names groups to fold explicitly (the outermost one wins).
    A group of a single node is left as that node.  Parallel edges are merged (``count``).
    """
    folded = {f for f in folded if f}
    rep: dict[Any, Any] = {}
    members: dict[str, list] = defaultdict(list)
    for n, d in G.nodes(data=True):
        g = _group_of(d, key)
        target = None
        if g:
            for p in _prefixes(g, sep):
                if p in folded or (depth is not None and p.count(sep) + 1 == depth):
                    target = p
                    break
        if target is None:
            rep[n] = n
        else:
            rep[n] = GROUP_PREFIX + target
            members[target].append(n)
    # a weight/constant used only inside one folded group belongs to it (FX placeholders for
    # parameters have no module path of their own)
    for nd, d in G.nodes(data=True):
        if rep[nd] != nd or str(d.get("kind", "")) not in PURE_KINDS or G.in_degree(nd):
            continue
        targets = {rep[s] for s in G.successors(nd)}
        if len(targets) == 1:
            t = next(iter(targets))
            if isinstance(t, str) and t.startswith(GROUP_PREFIX) and t != nd:
                rep[nd] = t
                members[t[len(GROUP_PREFIX):]].append(nd)
    for mem in members.values():
        if len(mem) == 1:
            rep[mem[0]] = mem[0]

    H = nx.DiGraph()
    H.graph.update(G.graph)
    for n, d in G.nodes(data=True):
        r = rep[n]
        if r == n:
            H.add_node(n, **d)
        elif r not in H:
            path = r[len(GROUP_PREFIX):]
            mem = members[path]
            kinds = defaultdict(int)
            for m in mem:
                kinds[G.nodes[m].get("kind", "op")] += 1
            n_ops = kinds.get("op", 0) + sum(v for k, v in kinds.items() if k.startswith("call"))
            H.add_node(
                r,
                label=path,
                sublabel=f"{n_ops} ops · {len(mem)} nodes" if n_ops else f"{len(mem)} nodes",
                kind="group",
                group_id=path,
                members=list(mem),
                count=len(mem),
                **({key: sep.join(path.split(sep)[:-1])} if key else {}),
            )
    for u, v, d in G.edges(data=True):
        ru, rv = rep[u], rep[v]
        if ru == rv:
            continue
        if H.has_edge(ru, rv):
            H[ru][rv]["count"] = H[ru][rv].get("count", 1) + 1
        else:
            H.add_edge(ru, rv, **d)
    return H


def choose_fold_depth(G: nx.DiGraph, key: str = "module_path", max_nodes: int = 400,
                      sep: str = ".") -> int | None:
    """Deepest fold depth whose folded graph has at most ``max_nodes`` nodes (None: no fold)."""
    if G.number_of_nodes() <= max_nodes:
        return None
    paths = [_group_of(d, key) for _, d in G.nodes(data=True)]
    max_depth = max((p.count(sep) + 1 for p in paths if p), default=0)
    for depth in range(max_depth, 0, -1):
        reps = set()
        for n, p in zip(G.nodes, paths):
            parts = p.split(sep) if p else []
            reps.add(("g", sep.join(parts[:depth])) if len(parts) >= depth else ("n", n))
        if len(reps) <= max_nodes:
            return depth
    return 1 if max_depth else None


def groups_at_depth(G: nx.DiGraph, key: str = "module_path", depth: int = 1,
                    sep: str = ".") -> set[str]:
    """Every group path with exactly ``depth`` components (a ``folded`` set equivalent to
    ``fold_depth=depth`` that single groups can then be removed from to unfold them)."""
    out = set()
    for _, d in G.nodes(data=True):
        g = _group_of(d, key)
        parts = g.split(sep) if g else []
        if len(parts) >= depth:
            out.add(sep.join(parts[:depth]))
    return out


def toggle_fold(folded: Iterable[str], group_id: str, sep: str = ".") -> set[str]:
    """The folded set after a click on ``group_id`` (a frame header folds it, a folded summary
    node unfolds it).  Folding a group drops its folded descendants, which it now hides."""
    folded = set(folded)
    if group_id in folded:
        folded.discard(group_id)
    else:
        folded = {f for f in folded if not f.startswith(group_id + sep)}
        folded.add(group_id)
    return folded


# --------------------------------------------------------------------------- the layout

def describe_nodes(G: nx.DiGraph, group_attr: str | None, sep: str) -> NodeInfo:
    """Labels, box sizes and group membership of every node, by index."""
    ids = list(G.nodes)
    n = len(ids)
    ndata = [G.nodes[v] for v in ids]
    labels = [node_label(v, d) for v, d in zip(ids, ndata)]
    sublabels = [node_sublabel(d) for d in ndata]
    gpath = [_group_of(d, group_attr) for d in ndata]
    chains = [_prefixes(p, sep) for p in gpath]
    members: dict[str, list[int]] = defaultdict(list)
    for i in range(n):
        for p in chains[i]:
            members[p].append(i)
    # a frame needs at least two real ops (a leaf module = one op + its weights adds nothing);
    # only framed groups take part in ordering and spacing
    framed = {p for p, m in members.items()
              if sum(1 for i in m if str(ndata[i].get("kind", "op")) not in NON_OP_KINDS) >= 2
              or (len(m) >= 2 and any(str(ndata[i].get("kind")) == "group" for i in m))}
    return NodeInfo(
        ids=ids, data=ndata, labels=labels, sublabels=sublabels,
        sizes=[node_size(lab, sub) for lab, sub in zip(labels, sublabels)],
        group=gpath, frame_chain=[[p for p in ps if p in framed] for ps in chains],
        members=members, framed=framed,
        # weights/constants are ordered with their group but do not stretch its frame: they
        # sink to just above their consumer, often beside the previous group's last node
        in_frame=[str(d.get("kind", "op")) not in PURE_KINDS for d in ndata],
    )


def layout_graph(
    G: nx.DiGraph,
    *,
    group_attr: str | None = None,
    folded: Iterable[str] = (),
    fold_depth: int | None = None,
    sep: str = ".",
) -> dict:
    """Lay ``G`` out top to bottom and return the protocol's ``graph`` dict.

    ``group_attr`` names the node attribute that holds the group path ("module_path" for FX,
    "group" for Relax fused functions); every path prefix with at least two nodes becomes a
    group frame.  ``folded`` / ``fold_depth`` collapse groups first (see :func:`fold_by_group`).
    """
    folded = tuple(folded)
    if group_attr and (folded or fold_depth is not None):
        G = fold_by_group(G, group_attr, depth=fold_depth, folded=folded, sep=sep)

    info = describe_nodes(G, group_attr, sep)
    index = {v: i for i, v in enumerate(info.ids)}
    edges = [(index[u], index[v], d) for u, v, d in G.edges(data=True)]
    work, wsucc, wpred = acyclic_edges(info.n, edges)
    layer, pure, nlayers = assign_layers(info, wsucc, wpred)
    slots = add_long_edge_bends(info, layer, work)
    layers = order_layers(slots, nlayers, info.grouped)
    x = assign_x(slots, layers, min_separations(slots, layers, info.grouped), pure)
    rows = assign_rows(info, layer, nlayers)

    nodes_out, boxes, shift = node_boxes(info, slots, x, rows, group_attr)
    edges_out = route_edges(info, slots, work, edges, x, rows, boxes, shift)
    groups_out = group_frames(info, layer, wsucc, wpred, boxes, sep) if info.grouped else []
    width, height = fit_to_margin(nodes_out, edges_out, groups_out, boxes)
    return {
        "nodes": nodes_out,
        "edges": edges_out,
        "groups": groups_out,
        "width": width,
        "height": height,
        "group_attr": group_attr,
        "folded": list(folded),
    }
