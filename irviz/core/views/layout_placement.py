"""Placement phases of the layered layout (see :mod:`irviz.core.views.layout`), in order:
cycle breaking, layering, long-edge bends, crossing reduction, x and y coordinates.

Nodes are plain indices: ``0 .. n-1`` are the graph's nodes, indices from ``n`` on are the
bend points ("dummies") of edges that span several layers.  networkx-free, no Qt.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

H_GAP = 28            # between neighbouring boxes in a layer
V_GAP = 44            # between layers
DUMMY_W = 10          # width reserved for a long edge passing through a layer
GROUP_PAD = 10        # frame padding around members
GROUP_HEADER = 20     # title strip on top of a group frame
SWEEPS = 4
STRAIGHTEN = 4
BIG_GRAPH = 8000      # above this many slots, fewer sweeps keep big models interactive

PURE_KINDS = {"param", "parameter", "buffer", "const", "constant"}
NON_OP_KINDS = PURE_KINDS | {"input", "output", "tuple", "get_item"}


@dataclass
class NodeInfo:
    """What the layout knows of each real node, by index."""
    ids: list[Any]
    data: list[dict]
    labels: list[str]
    sublabels: list[str]
    sizes: list[tuple[float, float]]
    group: list[str]                  # the node's full group path ("" when none)
    frame_chain: list[list[str]]      # its enclosing groups that get a frame, outermost first
    members: dict[str, list[int]]     # every group path prefix -> the nodes under it
    framed: set[str]                  # groups that get a frame
    in_frame: list[bool]              # False for weights/constants: they do not stretch frames

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def grouped(self) -> bool:
        return any(self.frame_chain)


@dataclass
class WorkEdge:
    """An edge of the acyclic working graph; ``reversed`` when it was turned to break a cycle."""
    src: int
    dst: int
    index: int                        # position in the original edge list
    reversed: bool


@dataclass
class Slots:
    """Every position of the layered graph: the real nodes, then one dummy per layer a long
    edge crosses, with their layer, width, frame chain and neighbours in adjacent layers."""
    n_real: int
    layer: list[int]
    width: list[float]
    frame_chain: list[list[str]]
    above: list[list[int]]            # neighbours in the layer above
    below: list[list[int]]            # neighbours in the layer below
    chains: list[list[int]] = field(default_factory=list)   # per work edge: slots top -> bottom
    is_dummy: list[bool] = field(default_factory=list)      # filled once the dummies are in

    @property
    def total(self) -> int:
        return len(self.layer)


@dataclass
class Rows:
    """Vertical placement: each layer's top and height, and the margin above the first."""
    top: list[float]
    height: list[float]
    margin: float


# --------------------------------------------------------------------------- cycles

def break_cycles(n: int, succ: list[list[int]]) -> set[tuple[int, int]]:
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


def acyclic_edges(n: int, edges: list[tuple[int, int, dict]]
                  ) -> tuple[list[WorkEdge], list[list[int]], list[list[int]]]:
    """The working edges (self-loops dropped, back edges reversed) and their successor and
    predecessor lists."""
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v, _ in edges:
        if u != v:
            succ[u].append(v)
    back = break_cycles(n, succ)
    work: list[WorkEdge] = []
    for k, (u, v, _) in enumerate(edges):
        if u == v:
            continue
        if (u, v) in back:
            work.append(WorkEdge(v, u, k, True))
        else:
            work.append(WorkEdge(u, v, k, False))
    wsucc: list[list[int]] = [[] for _ in range(n)]
    wpred: list[list[int]] = [[] for _ in range(n)]
    for e in work:
        wsucc[e.src].append(e.dst)
        wpred[e.dst].append(e.src)
    return work, wsucc, wpred


# --------------------------------------------------------------------------- layering

def _topological_order(n: int, wsucc: list[list[int]], wpred: list[list[int]]) -> list[int]:
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
    return order


def assign_layers(info: NodeInfo, wsucc: list[list[int]], wpred: list[list[int]]
                  ) -> tuple[list[int], list[bool], int]:
    """Layer of every node, whether it is "pure" (computed from weights/constants only), and
    the number of layers.

    Longest path from the sources, then every node with at least as many outgoing as incoming
    edges (and every pure node) sinks to just above its first consumer, so weights and side
    inputs sit beside the op that uses them instead of piling up in the top rows.
    """
    n = info.n
    order = _topological_order(n, wsucc, wpred)
    layer = [0] * n
    for v in order:
        if wpred[v]:
            layer[v] = max(layer[u] for u in wpred[v]) + 1
    # a transposed weight is as much a weight as the weight itself: the whole subtree sinks
    pure = [False] * n
    for v in order:
        if wpred[v]:
            pure[v] = all(pure[u] for u in wpred[v])
        else:
            pure[v] = str(info.data[v].get("kind", "")) in PURE_KINDS
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
            per_layer[layer[v]] += info.sizes[v][0] + H_GAP
        row_w = max([900.0] + list(per_layer.values()))
        cur = row_w + 1
        for v in isolated:
            if cur + info.sizes[v][0] > row_w:
                nlayers += 1
                cur = 0.0
            layer[v] = nlayers - 1
            cur += info.sizes[v][0] + H_GAP
    return layer, pure, nlayers


def common_prefix_len(a: list[str], b: list[str]) -> int:
    k = 0
    for x, y in zip(a, b):
        if x != y:
            break
        k += 1
    return k


def add_long_edge_bends(info: NodeInfo, layer: list[int], work: list[WorkEdge]) -> Slots:
    """One dummy slot per layer crossed by each long edge; a dummy belongs to the groups both
    ends share, so it is ordered with them."""
    n = info.n
    slots = Slots(n_real=n, layer=list(layer), width=[s[0] for s in info.sizes],
                  frame_chain=list(info.frame_chain),
                  above=[list() for _ in range(n)], below=[list() for _ in range(n)])
    chain_of = slots.frame_chain
    for e in work:
        u, v = e.src, e.dst
        chain = [u]
        prev = u
        common = chain_of[u][: common_prefix_len(chain_of[u], chain_of[v])]
        for lay in range(slots.layer[u] + 1, slots.layer[v]):
            d = len(slots.layer)
            slots.layer.append(lay)
            slots.width.append(DUMMY_W)
            chain_of.append(common)
            slots.above.append([prev])
            slots.below.append([])
            slots.below[prev].append(d)
            chain.append(d)
            prev = d
        slots.below[prev].append(v)
        slots.above[v].append(prev)
        chain.append(v)
        slots.chains.append(chain)
    slots.is_dummy = [i >= n for i in range(slots.total)]
    return slots


# --------------------------------------------------------------------------- ordering

def _initial_order(slots: Slots, nlayers: int) -> list[list[int]]:
    """A DFS from the sources in input order: related nodes start out adjacent."""
    layers: list[list[int]] = [[] for _ in range(nlayers)]
    seen = [False] * slots.total
    dfs_order: list[int] = []
    for root in sorted(range(slots.n_real), key=lambda i: (slots.layer[i], i)):
        if seen[root]:
            continue
        stack = [root]
        while stack:
            v = stack.pop()
            if seen[v]:
                continue
            seen[v] = True
            dfs_order.append(v)
            stack.extend(reversed(slots.below[v]))
    for v in dfs_order:
        layers[slots.layer[v]].append(v)
    return layers


def order_layers(slots: Slots, nlayers: int, grouped: bool) -> list[list[int]]:
    """Each layer's slots left to right: barycenter sweeps down and up; the slots of one group
    stay together at every level of its path."""
    layers = _initial_order(slots, nlayers)
    pos = [0.0] * slots.total
    for lay in layers:
        for i, v in enumerate(lay):
            pos[v] = float(i)

    # group prefixes as small ints (cheap dict keys)
    gid: dict[str, int] = {}
    chain_ids = [tuple(gid.setdefault(p, len(gid)) for p in ps) for ps in slots.frame_chain]

    def sort_layer(lay: list[int], nbrs: list[list[int]]) -> None:
        if len(lay) < 2:
            return
        bary = [(sum(map(pos.__getitem__, nb)) / len(nb)) if (nb := nbrs[v]) else pos[v]
                for v in lay]
        if grouped:
            gs: dict[int, float] = defaultdict(float)
            gc: dict[int, int] = defaultdict(int)
            for v, b in zip(lay, bary):
                for p in chain_ids[v]:
                    gs[p] += b
                    gc[p] += 1
            # an ungrouped node competes with a group at its top level
            keys = [tuple([gs[p] / gc[p] for p in chain_ids[v]] + [b])
                    for v, b in zip(lay, bary)]
        else:
            keys = bary
        order_ = sorted(range(len(lay)), key=keys.__getitem__)
        lay[:] = [lay[i] for i in order_]
        for i, v in enumerate(lay):
            pos[v] = float(i)

    sweeps = 2 if slots.total > BIG_GRAPH else SWEEPS
    for _ in range(sweeps):
        for lay in layers[1:]:
            sort_layer(lay, slots.above)
        for lay in reversed(layers[:-1]):
            sort_layer(lay, slots.below)
    # finish with a down sweep (top of the graph is what users read first)
    for lay in layers[1:]:
        sort_layer(lay, slots.above)
    return layers


# --------------------------------------------------------------------------- x coordinates

def min_separations(slots: Slots, layers: list[list[int]], grouped: bool) -> list[list[float]]:
    """Per layer, the least distance between the centres of each pair of neighbours: half
    widths, a gap, and padding for every frame that ends between them."""
    is_dummy = slots.is_dummy
    per_layer: list[list[float]] = []
    for lay in layers:
        seps = []
        for a, b in zip(lay, lay[1:]):
            gap = H_GAP if not (is_dummy[a] or is_dummy[b]) else H_GAP / 2
            if grouped:
                ca, cb = slots.frame_chain[a], slots.frame_chain[b]
                c = common_prefix_len(ca, cb)
                gap += GROUP_PAD * ((len(ca) - c) + (len(cb) - c))
            seps.append((slots.width[a] + slots.width[b]) / 2 + gap)
        per_layer.append(seps)
    return per_layer


def place_in_order(desired: list[float], seps: list[float], weights: list[float]) -> list[float]:
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


def _packed_centred(layers: list[list[int]], seps_per_layer: list[list[float]],
                    total: int) -> list[float]:
    x = [0.0] * total
    for lay, seps in zip(layers, seps_per_layer):
        cur = 0.0
        for i, v in enumerate(lay):
            if i:
                cur += seps[i - 1]
            x[v] = cur
        if lay:
            mid = (x[lay[0]] + x[lay[-1]]) / 2
            for v in lay:
                x[v] -= mid
    return x


def _pull_weights(slots: Slots, pure: list[bool], nbrs: list[list[int]]
                  ) -> list[tuple[list[int], list[float], float]]:
    """How hard each neighbour pulls a slot: real-real edges hardest (a straight spine, like
    Netron); long edges stay straight between their ends and bend only where they join a real
    node; weights and constants barely pull their consumer, so the data path stays straight
    and the weight is placed beside it."""
    res = []
    is_dummy = slots.is_dummy
    side = pure + [False] * (slots.total - slots.n_real)
    for v in range(slots.total):
        nb = nbrs[v]
        if is_dummy[v]:
            ws = [8.0 if is_dummy[u] else 1.0 for u in nb]
        elif side[v]:
            ws = [1.0 if is_dummy[u] else 4.0 for u in nb]
        else:
            ws = [1.0 if is_dummy[u] else (0.2 if side[u] else 4.0) for u in nb]
        res.append((nb, ws, sum(ws)))
    return res


def assign_x(slots: Slots, layers: list[list[int]], seps_per_layer: list[list[float]],
             pure: list[bool]) -> list[float]:
    """x of every slot's centre: packed and centred, then pulled towards the weighted mean x
    of the neighbours (down, up, both) and finally chains snapped vertical."""
    total, n, is_dummy = slots.total, slots.n_real, slots.is_dummy
    x = _packed_centred(layers, seps_per_layer, total)
    upw = _pull_weights(slots, pure, slots.above)
    downw = _pull_weights(slots, pure, slots.below)
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
        for v, nx_ in zip(lay, place_in_order(desired, seps, [mass[u] for u in lay])):
            x[v] = nx_

    for _ in range(2 if total > BIG_GRAPH else STRAIGHTEN):
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
            ups = data_nbrs(slots.above[v])
            if len(ups) != 1 or len(data_nbrs(slots.below[ups[0]])) != 1:
                continue
            desired[i] = x[ups[0]]
            masses[i] = 2.0 if is_dummy[v] else 50.0   # weights and long edges make room
            snapped = True
        if snapped:
            for v, nx_ in zip(lay, place_in_order(desired, seps, masses) if len(lay) > 1 else desired):
                x[v] = nx_
    return x


# --------------------------------------------------------------------------- y coordinates

def assign_rows(info: NodeInfo, layer: list[int], nlayers: int) -> Rows:
    """Layer heights plus room for the headers of frames that begin at a layer and the
    padding of frames that end there."""
    n, grouped = info.n, info.grouped
    lay_h = [0.0] * nlayers
    for i in range(n):
        lay_h[layer[i]] = max(lay_h[layer[i]], info.sizes[i][1])
    starts = [0] * nlayers
    ends = [0] * nlayers
    if grouped:
        gmin: dict[str, int] = {}
        gmax: dict[str, int] = {}
        for i in range(n):
            if not info.in_frame[i]:
                continue
            for p in info.frame_chain[i]:
                gmin[p] = min(gmin.get(p, layer[i]), layer[i])
                gmax[p] = max(gmax.get(p, layer[i]), layer[i])
        for i in range(n):
            if not info.in_frame[i]:
                continue
            s = sum(1 for p in info.frame_chain[i] if gmin[p] == layer[i])
            e = sum(1 for p in info.frame_chain[i] if gmax[p] == layer[i])
            starts[layer[i]] = max(starts[layer[i]], s)
            ends[layer[i]] = max(ends[layer[i]], e)
    lay_y = [0.0] * nlayers
    y = 0.0
    for li in range(nlayers):
        y += starts[li] * (GROUP_PAD + GROUP_HEADER)
        lay_y[li] = y
        y += lay_h[li] + ends[li] * GROUP_PAD + V_GAP
    return Rows(top=lay_y, height=lay_h, margin=20.0 + (GROUP_PAD * 3 if grouped else 0))
