"""Layered top-to-bottom layout of a networkx DiGraph into the engine protocol's ``graph`` dict.

networkx only, no Qt.  One entry point, :func:`layout_graph`, so another engine (graphviz,
graphlay) can be swapped in behind it.  Algorithm (Sugiyama-style, measured in shared NOTES):

1. cycles are broken by reversing DFS back edges (drawn upward);
2. layers = longest path from the sources, then every node with at least as many outgoing as
   incoming edges sinks to just above its first consumer (weights and side inputs sit beside the
   op that uses them instead of piling up in the top rows);
3. edges spanning several layers get dummy nodes (their bends);
4. crossing reduction: barycenter sweeps down and up; nodes of the same group (module path,
   fused function) are kept together at every level of the path;
5. x: nodes are pulled towards the mean x of their neighbours, then placed with minimum gaps
   by isotonic regression (pool-adjacent-violators), alternately down and up -> straight spines
   and straight long edges.

Coordinates: ``x``, ``y`` of nodes and groups are the *top-left* corner, ``w``, ``h`` the size,
in scene pixels (y grows downward).  Edge ``points`` run from the bottom of ``src`` to the top
of ``dst`` (for an edge reversed to break a cycle they run upward).
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable

import networkx as nx

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
H_GAP = 28            # between neighbouring boxes in a layer
V_GAP = 44            # between layers
DUMMY_W = 10          # width reserved for a long edge passing through a layer
GROUP_PAD = 10        # frame padding around members
GROUP_HEADER = 20     # title strip on top of a group frame
SWEEPS = 4
STRAIGHTEN = 4

GROUP_PREFIX = "group:"
PURE_KINDS = {"param", "parameter", "buffer", "const", "constant"}
NON_OP_KINDS = PURE_KINDS | {"input", "output", "tuple", "get_item"}   # id prefix of summary nodes made by fold_by_group


# --------------------------------------------------------------------------- labels and sizes

def _fmt_shape(shape: Any) -> str:
    if shape is None:
        return ""
    if isinstance(shape, str):
        return shape
    if isinstance(shape, (list, tuple)):
        if shape and all(isinstance(s, (list, tuple)) for s in shape):   # list of shapes
            return ", ".join(_fmt_shape(s) for s in shape)
        return "×".join(str(d) for d in shape) if shape else "scalar"
    return str(shape)


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
    text = _fmt_shape(shape)
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
    for path, mem in members.items():
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


# --------------------------------------------------------------------------- layout helpers

def _break_cycles(n: int, succ: list[list[int]]) -> set[tuple[int, int]]:
    """Back edges of an iterative DFS (reversing them makes the graph acyclic)."""
    color = [0] * n
    back: set[tuple[int, int]] = set()
    for root in range(n):
        if color[root]:
            continue
        stack = [(root, iter(succ[root]))]
        color[root] = 1
        while stack:
            v, it = stack[-1]
            for w in it:
                if color[w] == 0:
                    color[w] = 1
                    stack.append((w, iter(succ[w])))
                    break
                if color[w] == 1:
                    back.add((v, w))
            else:
                color[v] = 2
                stack.pop()
    return back


def _place(desired: list[float], seps: list[float], weights: list[float]) -> list[float]:
    """Positions closest (weighted least squares) to ``desired`` with x[i+1] - x[i] >= seps[i]:
    weighted isotonic regression of desired - offsets by pool-adjacent-violators.  A light
    node (a weight beside its consumer) gives way to a heavy one (the data path)."""
    n = len(desired)
    off = [0.0] * n
    for i in range(1, n):
        off[i] = off[i - 1] + seps[i - 1]
    sums: list[float] = []    # sum of w * target per block
    ws: list[float] = []      # sum of w per block
    cnts: list[int] = []
    for i in range(n):
        w = weights[i]
        s, sw, c = (desired[i] - off[i]) * w, w, 1
        while sums and sums[-1] * sw > s * ws[-1]:
            s += sums.pop()
            sw += ws.pop()
            c += cnts.pop()
        sums.append(s)
        ws.append(sw)
        cnts.append(c)
    out = [0.0] * n
    i = 0
    for s, sw, c in zip(sums, ws, cnts):
        m = s / sw
        for _ in range(c):
            out[i] = m + off[i]
            i += 1
    return out


def _common(a: list[str], b: list[str]) -> int:
    k = 0
    for x, y in zip(a, b):
        if x != y:
            break
        k += 1
    return k


# --------------------------------------------------------------------------- the layout

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

    ids = list(G.nodes)
    n = len(ids)
    index = {v: i for i, v in enumerate(ids)}
    ndata = [G.nodes[v] for v in ids]
    labels = [node_label(v, d) for v, d in zip(ids, ndata)]
    sublabels = [node_sublabel(d) for d in ndata]
    sizes = [node_size(lab, sub) for lab, sub in zip(labels, sublabels)]
    gpath = [_group_of(d, group_attr) for d in ndata]
    gpre = [_prefixes(p, sep) for p in gpath]
    # frames: a group needs at least two real ops (a leaf module = one op + its weights adds
    # nothing); only those take part in ordering and spacing
    gmembers: dict[str, list[int]] = defaultdict(list)
    for i in range(n):
        for p in gpre[i]:
            gmembers[p].append(i)
    kept_groups = {p for p, m in gmembers.items()
                   if sum(1 for i in m if str(ndata[i].get("kind", "op")) not in NON_OP_KINDS) >= 2
                   or (len(m) >= 2 and any(str(ndata[i].get("kind")) == "group" for i in m))}
    gpre = [[p for p in ps if p in kept_groups] for ps in gpre]
    # weights/constants are ordered with their group but do not stretch its frame: they sink
    # to just above their consumer, often beside the previous group's last node
    in_frame = [str(d.get("kind", "op")) not in PURE_KINDS for d in ndata]

    edges = [(index[u], index[v], d) for u, v, d in G.edges(data=True)]
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v, _ in edges:
        if u != v:
            succ[u].append(v)
    back = _break_cycles(n, succ)

    # acyclic working edges (u -> v), with a flag when reversed
    work: list[tuple[int, int, int, bool]] = []   # (u, v, edge index, reversed)
    for k, (u, v, _) in enumerate(edges):
        if u == v:
            continue
        if (u, v) in back:
            work.append((v, u, k, True))
        else:
            work.append((u, v, k, False))
    wsucc: list[list[int]] = [[] for _ in range(n)]
    wpred: list[list[int]] = [[] for _ in range(n)]
    for u, v, _, _ in work:
        wsucc[u].append(v)
        wpred[v].append(u)

    # ---- layering: longest path, then sink producers towards their first consumer
    indeg = [len(p) for p in wpred]
    order: list[int] = [i for i in range(n) if indeg[i] == 0]
    head = 0
    while head < len(order):
        v = order[head]
        head += 1
        for w in wsucc[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                order.append(w)
    layer = [0] * n
    for v in order:
        if wpred[v]:
            layer[v] = max(layer[u] for u in wpred[v]) + 1
    # "pure" nodes are computed from weights/constants only (e.g. a transposed weight): the
    # whole subtree sinks to its consumer
    pure = [False] * n
    for v in order:
        if wpred[v]:
            pure[v] = all(pure[u] for u in wpred[v])
        else:
            pure[v] = str(ndata[v].get("kind", "")) in PURE_KINDS
    for v in reversed(order):
        s = wsucc[v]
        if s and (len(s) >= len(wpred[v]) or pure[v]):
            layer[v] = min(layer[w] for w in s) - 1
    # nodes without any edge (e.g. unused BatchNorm num_batches_tracked buffers) would all sit
    # in the top row: put them in rows of their own under the graph
    isolated = [v for v in range(n) if not wpred[v] and not wsucc[v]]
    connected = [v for v in range(n) if wpred[v] or wsucc[v]]
    if connected:
        base = min(layer[v] for v in connected)
        layer = [l - base for l in layer]
        nlayers = max(layer[v] for v in connected) + 1
    else:
        nlayers = 0
    if isolated:
        per_layer: dict[int, float] = defaultdict(float)
        for v in connected:
            per_layer[layer[v]] += sizes[v][0] + H_GAP
        row_w = max([900.0] + list(per_layer.values()))
        cur = row_w + 1
        for v in isolated:
            if cur + sizes[v][0] > row_w:
                nlayers += 1
                cur = 0.0
            layer[v] = nlayers - 1
            cur += sizes[v][0] + H_GAP

    # ---- dummy nodes for long edges
    # node arrays grow with dummies: index >= n is a dummy
    L = list(layer)
    width = [s[0] for s in sizes]
    pre = list(gpre)
    up: list[list[int]] = [list() for _ in range(n)]     # neighbours in layer-1
    down: list[list[int]] = [list() for _ in range(n)]   # neighbours in layer+1
    chains: list[list[int]] = []                         # per work edge: nodes top -> bottom
    for u, v, k, rev in work:
        chain = [u]
        prev = u
        common = pre[u][: _common(pre[u], pre[v])]
        for lay in range(L[u] + 1, L[v]):
            d = len(L)
            L.append(lay)
            width.append(DUMMY_W)
            pre.append(common)
            up.append([prev])
            down.append([])
            down[prev].append(d)
            chain.append(d)
            prev = d
        down[prev].append(v)
        up[v].append(prev)
        chain.append(v)
        chains.append(chain)
    total = len(L)
    is_dummy = [i >= n for i in range(total)]

    layers: list[list[int]] = [[] for _ in range(nlayers)]
    # initial order: a DFS from the sources in input order gives related nodes adjacent
    seen = [False] * total
    dfs_order: list[int] = []
    for root in sorted(range(n), key=lambda i: (L[i], i)):
        if seen[root]:
            continue
        stack = [root]
        while stack:
            v = stack.pop()
            if seen[v]:
                continue
            seen[v] = True
            dfs_order.append(v)
            stack.extend(reversed(down[v]))
    for v in dfs_order:
        layers[L[v]].append(v)
    pos = [0.0] * total
    for lay in layers:
        for i, v in enumerate(lay):
            pos[v] = float(i)

    grouped = any(gpre)

    # group prefixes as small ints (cheap dict keys)
    gid: dict[str, int] = {}
    pre_i = [tuple(gid.setdefault(p, len(gid)) for p in ps) for ps in pre]

    def sort_layer(lay: list[int], nbrs: list[list[int]]) -> None:
        if len(lay) < 2:
            return
        bary = [(sum(map(pos.__getitem__, nb)) / len(nb)) if (nb := nbrs[v]) else pos[v]
                for v in lay]
        if grouped:
            gs: dict[int, float] = defaultdict(float)
            gc: dict[int, int] = defaultdict(int)
            for v, b in zip(lay, bary):
                for p in pre_i[v]:
                    gs[p] += b
                    gc[p] += 1
            # an ungrouped node competes with a group at its top level
            keys = [tuple([gs[p] / gc[p] for p in pre_i[v]] + [b]) for v, b in zip(lay, bary)]
        else:
            keys = bary
        order_ = sorted(range(len(lay)), key=keys.__getitem__)
        lay[:] = [lay[i] for i in order_]
        for i, v in enumerate(lay):
            pos[v] = float(i)

    big = total > 8000
    sweeps = 2 if big else SWEEPS
    for _ in range(sweeps):
        for lay in layers[1:]:
            sort_layer(lay, up)
        for lay in reversed(layers[:-1]):
            sort_layer(lay, down)
    # finish with a down sweep (top of the graph is what users read first)
    for lay in layers[1:]:
        sort_layer(lay, up)

    # ---- x coordinates
    seps_per_layer: list[list[float]] = []
    for lay in layers:
        seps = []
        for a, b in zip(lay, lay[1:]):
            gap = H_GAP if not (is_dummy[a] or is_dummy[b]) else H_GAP / 2
            if grouped:
                c = _common(pre[a], pre[b])
                gap += GROUP_PAD * ((len(pre[a]) - c) + (len(pre[b]) - c))
            seps.append((width[a] + width[b]) / 2 + gap)
        seps_per_layer.append(seps)
    x = [0.0] * total
    for lay, seps in zip(layers, seps_per_layer):
        cur = 0.0
        for i, v in enumerate(lay):
            if i:
                cur += seps[i - 1]
            x[v] = cur
        # centre each layer on 0
        if lay:
            mid = (x[lay[0]] + x[lay[-1]]) / 2
            for v in lay:
                x[v] -= mid

    def weighted(nbrs: list[list[int]]) -> list[tuple[list[int], list[float], float]]:
        res = []
        # weights/constants barely pull their consumer: the data path stays straight and
        # the weight is placed beside it
        side = pure + [False] * (total - n)
        for v in range(total):
            nb = nbrs[v]
            # real-real edges pull hardest (a straight spine, like Netron), long edges stay
            # straight between their ends and bend only where they join a real node
            if is_dummy[v]:
                ws = [8.0 if is_dummy[u] else 1.0 for u in nb]
            elif side[v]:
                ws = [1.0 if is_dummy[u] else 4.0 for u in nb]
            else:
                ws = [1.0 if is_dummy[u] else (0.2 if side[u] else 4.0) for u in nb]
            res.append((nb, ws, sum(ws)))
        return res

    upw, downw = weighted(up), weighted(down)
    mass = [0.5 if is_dummy[v] else (0.05 if pure[v] else 1.0) for v in range(total)]
    bothw = [(a[0] + b[0], a[1] + b[1], a[2] + b[2]) for a, b in zip(upw, downw)]

    def straighten(lay: list[int], seps: list[float], nbw) -> None:
        desired = []
        for v in lay:
            nb, ws, wsum = nbw[v]
            if nb:
                desired.append(sum([x[u] * w for u, w in zip(nb, ws)]) / wsum)
            else:
                desired.append(x[v])
        if len(lay) == 1:
            x[lay[0]] = desired[0]
            return
        for v, nx_ in zip(lay, _place(desired, seps, [mass[u] for u in lay])):
            x[v] = nx_

    for it in range(2 if big else STRAIGHTEN):
        for lay, seps in zip(layers[1:], seps_per_layer[1:]):
            straighten(lay, seps, upw)
        for lay, seps in zip(reversed(layers[:-1]), reversed(seps_per_layer[:-1])):
            straighten(lay, seps, downw)
    for lay, seps in zip(layers, seps_per_layer):
        if lay:
            straighten(lay, seps, bothw)

    # chains: a node whose only data input comes from a node with only this consumer sits
    # exactly below it (as far as its neighbours allow), so spines are vertical and bends
    # happen only at forks and joins
    def data_nbrs(nb: list[int]) -> list[int]:
        return [u for u in nb if not (u < n and pure[u])]

    for lay, seps in zip(layers[1:], seps_per_layer[1:]):
        desired = [x[v] for v in lay]
        masses = [mass[v] for v in lay]
        snapped = False
        for i, v in enumerate(lay):
            ups = data_nbrs(up[v])
            if len(ups) != 1 or len(data_nbrs(down[ups[0]])) != 1:
                continue
            desired[i] = x[ups[0]]
            masses[i] = 2.0 if is_dummy[v] else 50.0   # weights and long edges make room
            snapped = True
        if snapped:
            for v, nx_ in zip(lay, _place(desired, seps, masses) if len(lay) > 1 else desired):
                x[v] = nx_

    # ---- y coordinates: layer heights + room for group headers/padding
    lay_h = [0.0] * nlayers
    for i in range(n):
        lay_h[L[i]] = max(lay_h[L[i]], sizes[i][1])
    starts = [0] * nlayers   # group frames beginning at a layer (need header room above)
    ends = [0] * nlayers     # group frames ending at a layer (need padding below)
    if grouped:
        gmin: dict[str, int] = {}
        gmax: dict[str, int] = {}
        for i in range(n):
            if not in_frame[i]:
                continue
            for p in gpre[i]:
                gmin[p] = min(gmin.get(p, L[i]), L[i])
                gmax[p] = max(gmax.get(p, L[i]), L[i])
        for i in range(n):
            if not in_frame[i]:
                continue
            s = sum(1 for p in gpre[i] if gmin[p] == L[i])
            e = sum(1 for p in gpre[i] if gmax[p] == L[i])
            starts[L[i]] = max(starts[L[i]], s)
            ends[L[i]] = max(ends[L[i]], e)
    lay_y = [0.0] * nlayers
    y = 0.0
    for li in range(nlayers):
        y += starts[li] * (GROUP_PAD + GROUP_HEADER)
        lay_y[li] = y
        y += lay_h[li] + ends[li] * GROUP_PAD + V_GAP
    margin = 20.0 + (GROUP_PAD * 3 if grouped else 0)

    minx = min((x[v] - width[v] / 2 for v in range(total)), default=0.0)
    shift = margin - minx
    nodes_out = []
    boxes = []
    for i in range(n):
        w, h = sizes[i]
        top = lay_y[L[i]] + (lay_h[L[i]] - h) / 2 + margin
        left = x[i] + shift - w / 2
        boxes.append((left, top, w, h))
        d = dict(ndata[i])
        d.update(id=str(ids[i]), label=labels[i], sublabel=sublabels[i],
                 kind=d.get("kind") or "op", x=round(left, 1), y=round(top, 1), w=w, h=h,
                 layer=L[i])
        if group_attr:
            d["group"] = gpath[i] or None
        nodes_out.append(d)

    # ---- edges: spread ports along box edges, bend through dummy points
    def spread(ends_of: dict[int, list[tuple[float, int]]], top: bool) -> dict[tuple[int, int], float]:
        res = {}
        for v, lst in ends_of.items():
            lst.sort()
            k = len(lst)
            left, _, w, _ = boxes[v]
            span = min(w * 0.6, 14.0 * (k - 1))
            for j, (_, e) in enumerate(lst):
                off = 0.0 if k == 1 else -span / 2 + span * j / (k - 1)
                res[(v, e)] = left + w / 2 + off
        return res

    outs: dict[int, list] = defaultdict(list)
    ins: dict[int, list] = defaultdict(list)
    for e, chain in enumerate(chains):
        outs[chain[0]].append((x[chain[1]], e))
        ins[chain[-1]].append((x[chain[-2]], e))
    out_x = spread(outs, False)
    in_x = spread(ins, True)
    edge_out: list[dict | None] = [None] * len(edges)
    for e, (chain, (u, v, k, rev)) in enumerate(zip(chains, work)):
        bu, bv = boxes[chain[0]], boxes[chain[-1]]
        pts = [[round(out_x[(chain[0], e)], 1), round(bu[1] + bu[3], 1)]]
        for d in chain[1:-1]:
            # straight through the node band of the layer (the dummy's own slot), so a long
            # edge never cuts through a box; it bends only in the gaps between layers
            top = lay_y[L[d]] + margin
            dx = round(x[d] + shift, 1)
            pts.append([dx, round(top, 1)])
            if lay_h[L[d]] > 0:
                pts.append([dx, round(top + lay_h[L[d]], 1)])
        pts.append([round(in_x[(chain[-1], e)], 1), round(bv[1], 1)])
        if rev:
            pts.reverse()
        edge_out[k] = {"points": pts}
    edges_out = []
    for k, (u, v, d) in enumerate(edges):
        e = dict(d)
        label = d.get("label")
        if label is None:
            label = _fmt_shape(d.get("shape")) if d.get("shape") is not None else sublabels[u]
        e.update(src=str(ids[u]), dst=str(ids[v]), label=str(label),
                 points=(edge_out[k] or {"points": []})["points"])
        edges_out.append(e)

    # ---- groups: bounding boxes, children first, nested frames padded
    groups_out = []
    if grouped:
        keep = set(kept_groups)
        rect: dict[str, list[float]] = {}
        parent_of: dict[str, str | None] = {}
        children: dict[str, list[str]] = defaultdict(list)
        for p in keep:
            parts = p.split(sep)
            par = next((sep.join(parts[:j]) for j in range(len(parts) - 1, 0, -1)
                        if sep.join(parts[:j]) in keep), None)
            parent_of[p] = par
            if par is not None:
                children[par].append(p)
        for p in sorted(keep, key=lambda s: -s.count(sep)):
            x0 = y0 = math.inf
            x1 = y1 = -math.inf
            for i in gmembers[p]:
                if not in_frame[i]:
                    continue
                l, t, w, h = boxes[i]
                x0, y0, x1, y1 = min(x0, l), min(y0, t), max(x1, l + w), max(y1, t + h)
            for c in children.get(p, ()):
                cx0, cy0, cx1, cy1 = rect[c]
                x0, y0, x1, y1 = min(x0, cx0), min(y0, cy0), max(x1, cx1), max(y1, cy1)
            rect[p] = [x0 - GROUP_PAD, y0 - GROUP_PAD - GROUP_HEADER, x1 + GROUP_PAD, y1 + GROUP_PAD]
        # frames: one per group; a leaf group whose nodes form separate pieces (one fused
        # function or one module called at several places) gets one frame per piece
        frames: list[tuple[str, str, list[int]]] = []     # (frame id, group, members)
        split: set[str] = set()
        for p in sorted(keep, key=lambda s: (s.count(sep), s)):
            mem = gmembers[p]
            pieces = [mem]
            if not any(c in keep for c in children.get(p, ())):
                core = [i for i in mem if in_frame[i]]
                cset = set(core)
                comp: dict[int, int] = {}
                for i in core:
                    if i in comp:
                        continue
                    comp[i] = i
                    stack = [i]
                    while stack:
                        v = stack.pop()
                        for u in wpred[v] + wsucc[v]:
                            if u in cset and u not in comp:
                                comp[u] = i
                                stack.append(u)
                roots = sorted(set(comp.values()), key=lambda r: (L[r], r))
                if len(roots) > 1:
                    by_root: dict[int, list[int]] = defaultdict(list)
                    for i in core:
                        by_root[comp[i]].append(i)
                    pieces = [sorted(by_root[r]) for r in roots if len(by_root[r]) >= 2]
                    split.add(p)
            for k, piece in enumerate(pieces):
                fid = p if k == 0 else f"{p}#{k + 1}"
                if len(pieces) > 1:
                    x0 = min(boxes[i][0] for i in piece)
                    y0 = min(boxes[i][1] for i in piece)
                    x1 = max(boxes[i][0] + boxes[i][2] for i in piece)
                    y1 = max(boxes[i][1] + boxes[i][3] for i in piece)
                    rect[fid] = [x0 - GROUP_PAD, y0 - GROUP_PAD - GROUP_HEADER,
                                 x1 + GROUP_PAD, y1 + GROUP_PAD]
                frames.append((fid, p, piece))

        # siblings whose frames overlap (a module called at two distant places): keep the
        # larger frame, the smaller group's nodes stay inside their parent
        dropped: set[str] = set()
        sib: dict[str | None, list[str]] = defaultdict(list)
        for p in keep - split:
            sib[parent_of[p]].append(p)
        for lst in sib.values():
            if len(lst) < 2 or len(lst) > 400:
                continue
            lst.sort(key=lambda q: (-len(gmembers[q]), q))
            for a_i, a in enumerate(lst):
                if a in dropped:
                    continue
                ax0, ay0, ax1, ay1 = rect[a]
                for b in lst[a_i + 1:]:
                    if b in dropped:
                        continue
                    bx0, by0, bx1, by1 = rect[b]
                    if bx0 < ax1 and ax0 < bx1 and by0 < ay1 and ay0 < by1:
                        dropped.add(b)
                        dropped.update(q for q in keep if q.startswith(b + sep))
        keep -= dropped
        frames = [f for f in frames if f[1] in keep]

        # a frame that would enclose nodes of other groups is misleading: drop it
        by_layer: dict[int, list[int]] = defaultdict(list)
        for i in range(n):
            if in_frame[i]:
                by_layer[L[i]].append(i)
        shown: list[tuple[str, str, list[int]]] = []
        gone: set[str] = set()
        for fid, p, piece in frames:
            if any(p.startswith(g + sep) for g in gone):
                continue
            x0, y0, x1, y1 = rect[fid]
            mem = set(gmembers[p])
            lays = [L[i] for i in piece if in_frame[i]]
            bad = False
            for li in range(min(lays, default=0), max(lays, default=-1) + 1):
                if any(i not in mem and x0 < boxes[i][0] + boxes[i][2] / 2 < x1
                       for i in by_layer.get(li, ())):
                    bad = True
                    break
            if bad:
                if fid == p:
                    gone.add(p)
                continue
            shown.append((fid, p, piece))
        visible = {p for _, p, _ in shown}
        for fid, p, piece in shown:
            x0, y0, x1, y1 = rect[fid]
            parent = parent_of[p]
            while parent is not None and parent not in visible:
                parent = parent_of[parent]
            groups_out.append({
                "id": fid, "label": p, "fold_id": p, "x": round(x0, 1), "y": round(y0, 1),
                "w": round(x1 - x0, 1), "h": round(y1 - y0, 1),
                "members": [str(ids[i]) for i in piece],
                "depth": p.count(sep) + 1, "parent": parent,
            })

    # translate so that everything (frames included) starts at (20, 20)
    x_min = min([b[0] for b in boxes] + [g["x"] for g in groups_out], default=0.0)
    y_min = min([b[1] for b in boxes] + [g["y"] for g in groups_out], default=0.0)
    dx, dy = round(20.0 - x_min, 1), round(20.0 - y_min, 1)
    if dx or dy:
        for item in nodes_out + groups_out:
            item["x"] = round(item["x"] + dx, 1)
            item["y"] = round(item["y"] + dy, 1)
        for e in edges_out:
            e["points"] = [[round(px + dx, 1), round(py + dy, 1)] for px, py in e["points"]]
        boxes = [(b[0] + dx, b[1] + dy, b[2], b[3]) for b in boxes]
    xs = [b[0] + b[2] for b in boxes] + [g["x"] + g["w"] for g in groups_out]
    ys = [b[1] + b[3] for b in boxes] + [g["y"] + g["h"] for g in groups_out]
    margin = 20.0
    return {
        "nodes": nodes_out,
        "edges": edges_out,
        "groups": groups_out,
        "width": round(max(xs, default=0.0) + margin, 1),
        "height": round(max(ys, default=0.0) + margin, 1),
        "group_attr": group_attr,
        "folded": list(folded),
    }
