"""Last phases of the layered layout (see :mod:`irviz.core.views.layout`): placed slots become
the protocol's node boxes, edge polylines and group frames.  No Qt."""
from __future__ import annotations

import math
from collections import defaultdict

from irviz.core.views.layout_placement import (
    GROUP_HEADER, GROUP_PAD, NodeInfo, Rows, Slots, WorkEdge,
)

Box = tuple[float, float, float, float]          # left, top, width, height
Rect = list[float]                                # x0, y0, x1, y1
Frame = tuple[str, str, list[int]]                # frame id, group path, member nodes

OUTER_MARGIN = 20.0


def fmt_shape(shape) -> str:
    if shape is None:
        return ""
    if isinstance(shape, str):
        return shape
    if isinstance(shape, (list, tuple)):
        if shape and all(isinstance(s, (list, tuple)) for s in shape):   # list of shapes
            return ", ".join(fmt_shape(s) for s in shape)
        return "×".join(str(d) for d in shape) if shape else "scalar"
    return str(shape)


# --------------------------------------------------------------------------- nodes

def node_boxes(info: NodeInfo, slots: Slots, x: list[float], rows: Rows,
               group_attr: str | None) -> tuple[list[dict], list[Box], float]:
    """Protocol node dicts, their boxes, and the x shift from slot centres to the scene."""
    minx = min((x[v] - slots.width[v] / 2 for v in range(slots.total)), default=0.0)
    shift = rows.margin - minx
    nodes_out = []
    boxes: list[Box] = []
    for i in range(info.n):
        w, h = info.sizes[i]
        li = slots.layer[i]
        top = rows.top[li] + (rows.height[li] - h) / 2 + rows.margin
        left = x[i] + shift - w / 2
        boxes.append((left, top, w, h))
        d = dict(info.data[i])
        d.update(id=str(info.ids[i]), label=info.labels[i], sublabel=info.sublabels[i],
                 kind=d.get("kind") or "op", x=round(left, 1), y=round(top, 1), w=w, h=h,
                 layer=li)
        if group_attr:
            d["group"] = info.group[i] or None
        nodes_out.append(d)
    return nodes_out, boxes, shift


# --------------------------------------------------------------------------- edges

def _spread_ports(ends_of: dict[int, list[tuple[float, int]]], boxes: list[Box]
                  ) -> dict[tuple[int, int], float]:
    """x of each edge end on a box side: spread in the order of where the edges go."""
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


def route_edges(info: NodeInfo, slots: Slots, work: list[WorkEdge],
                edges: list[tuple[int, int, dict]], x: list[float], rows: Rows,
                boxes: list[Box], shift: float) -> list[dict]:
    """Protocol edge dicts: from the bottom of src to the top of dst through the edge's bends."""
    outs: dict[int, list] = defaultdict(list)
    ins: dict[int, list] = defaultdict(list)
    for e, chain in enumerate(slots.chains):
        outs[chain[0]].append((x[chain[1]], e))
        ins[chain[-1]].append((x[chain[-2]], e))
    out_x = _spread_ports(outs, boxes)
    in_x = _spread_ports(ins, boxes)
    points_of: list[list | None] = [None] * len(edges)
    for e, (chain, we) in enumerate(zip(slots.chains, work)):
        bu, bv = boxes[chain[0]], boxes[chain[-1]]
        pts = [[round(out_x[(chain[0], e)], 1), round(bu[1] + bu[3], 1)]]
        for d in chain[1:-1]:
            # straight through the node band of the layer (the dummy's own slot), so a long
            # edge never cuts through a box; it bends only in the gaps between layers
            li = slots.layer[d]
            top = rows.top[li] + rows.margin
            dx = round(x[d] + shift, 1)
            pts.append([dx, round(top, 1)])
            if rows.height[li] > 0:
                pts.append([dx, round(top + rows.height[li], 1)])
        pts.append([round(in_x[(chain[-1], e)], 1), round(bv[1], 1)])
        pts = _without_straight_bends(pts)
        if we.reversed:
            pts.reverse()
        points_of[we.index] = pts
    edges_out = []
    for k, (u, v, d) in enumerate(edges):
        e = dict(d)
        label = d.get("label")
        if label is None:
            label = fmt_shape(d.get("shape")) if d.get("shape") is not None else info.sublabels[u]
        e.update(src=str(info.ids[u]), dst=str(info.ids[v]), label=str(label),
                 points=points_of[k] or [])
        edges_out.append(e)
    return edges_out


def _without_straight_bends(pts: list[list[float]]) -> list[list[float]]:
    """The points without those inside a vertical run: the edge is drawn the same (the GUI's
    curves leave and reach every point vertically), and an 8B LLM's long edges, one point per
    layer they cross, made 170,000 points, 3.7 MB of its Relax graph."""
    out = pts[:1]
    for k in range(1, len(pts) - 1):
        if not (out[-1][0] == pts[k][0] == pts[k + 1][0]):
            out.append(pts[k])
    out.extend(pts[len(pts) - 1:] if len(pts) > 1 else ())
    return out


# --------------------------------------------------------------------------- group frames

def _padded(x0: float, y0: float, x1: float, y1: float) -> Rect:
    return [x0 - GROUP_PAD, y0 - GROUP_PAD - GROUP_HEADER, x1 + GROUP_PAD, y1 + GROUP_PAD]


def _group_tree(keep: set[str], sep: str) -> tuple[dict[str, str | None], dict[str, list[str]]]:
    """Nearest framed ancestor of every framed group, and its framed children."""
    parent_of: dict[str, str | None] = {}
    children: dict[str, list[str]] = defaultdict(list)
    for p in keep:
        parts = p.split(sep)
        par = next((sep.join(parts[:j]) for j in range(len(parts) - 1, 0, -1)
                    if sep.join(parts[:j]) in keep), None)
        parent_of[p] = par
        if par is not None:
            children[par].append(p)
    return parent_of, children


def _group_rects(info: NodeInfo, keep: set[str], children: dict[str, list[str]],
                 boxes: list[Box], sep: str) -> dict[str, Rect]:
    """Bounding frame of each group: children first, so nested frames are padded."""
    rect: dict[str, Rect] = {}
    for p in sorted(keep, key=lambda s: -s.count(sep)):
        x0 = y0 = math.inf
        x1 = y1 = -math.inf
        for i in info.members[p]:
            if not info.in_frame[i]:
                continue
            l, t, w, h = boxes[i]
            x0, y0, x1, y1 = min(x0, l), min(y0, t), max(x1, l + w), max(y1, t + h)
        for c in children.get(p, ()):
            cx0, cy0, cx1, cy1 = rect[c]
            x0, y0, x1, y1 = min(x0, cx0), min(y0, cy0), max(x1, cx1), max(y1, cy1)
        rect[p] = _padded(x0, y0, x1, y1)
    return rect


def _connected_pieces(info: NodeInfo, members: list[int], layer: list[int],
                      wsucc: list[list[int]], wpred: list[list[int]]) -> list[list[int]] | None:
    """The framed members split into connected pieces of at least two nodes, or None when
    they form one piece."""
    core = [i for i in members if info.in_frame[i]]
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
    roots = sorted(set(comp.values()), key=lambda r: (layer[r], r))
    if len(roots) <= 1:
        return None
    by_root: dict[int, list[int]] = defaultdict(list)
    for i in core:
        by_root[comp[i]].append(i)
    return [sorted(by_root[r]) for r in roots if len(by_root[r]) >= 2]


def _frames(info: NodeInfo, keep: set[str], children: dict[str, list[str]], rect: dict[str, Rect],
            layer: list[int], wsucc: list[list[int]], wpred: list[list[int]], boxes: list[Box],
            sep: str) -> tuple[list[Frame], set[str]]:
    """One frame per group; a leaf group whose nodes form separate pieces (one fused function
    or one module called at several places) gets one frame per piece, ids ``g``, ``g#2``...
    Returns the frames and the groups that were split (``rect`` gains the pieces' rects)."""
    frames: list[Frame] = []
    split: set[str] = set()
    for p in sorted(keep, key=lambda s: (s.count(sep), s)):
        mem = info.members[p]
        pieces = [mem]
        if not any(c in keep for c in children.get(p, ())):
            found = _connected_pieces(info, mem, layer, wsucc, wpred)
            if found is not None:
                pieces = found
                split.add(p)
        for k, piece in enumerate(pieces):
            fid = p if k == 0 else f"{p}#{k + 1}"
            if len(pieces) > 1:
                rect[fid] = _padded(min(boxes[i][0] for i in piece),
                                    min(boxes[i][1] for i in piece),
                                    max(boxes[i][0] + boxes[i][2] for i in piece),
                                    max(boxes[i][1] + boxes[i][3] for i in piece))
            frames.append((fid, p, piece))
    return frames, split


def _overlapping_siblings(info: NodeInfo, keep: set[str], split: set[str],
                          parent_of: dict[str, str | None], rect: dict[str, Rect],
                          sep: str) -> set[str]:
    """Siblings whose frames overlap (a module called at two distant places): the larger frame
    stays, the smaller group (and its subgroups) is dropped and its nodes stay inside the
    parent."""
    dropped: set[str] = set()
    sib: dict[str | None, list[str]] = defaultdict(list)
    for p in keep - split:
        sib[parent_of[p]].append(p)
    for lst in sib.values():
        if len(lst) < 2 or len(lst) > 400:
            continue
        lst.sort(key=lambda q: (-len(info.members[q]), q))
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
    return dropped


def _honest_frames(info: NodeInfo, frames: list[Frame], rect: dict[str, Rect],
                   layer: list[int], boxes: list[Box], sep: str) -> list[Frame]:
    """The frames that enclose no node of another group (such a frame would mislead).  Each
    frame is judged on its own: a transformer's outermost module frame encloses the model's
    input, but its blocks' frames are honest and stay (they are how one finds one's way)."""
    by_layer: dict[int, list[int]] = defaultdict(list)
    for i in range(info.n):
        if info.in_frame[i]:
            by_layer[layer[i]].append(i)
    shown: list[Frame] = []
    for fid, p, piece in frames:
        x0, _, x1, _ = rect[fid]
        mem = set(info.members[p])
        lays = [layer[i] for i in piece if info.in_frame[i]]
        bad = False
        for li in range(min(lays, default=0), max(lays, default=-1) + 1):
            if any(i not in mem and x0 < boxes[i][0] + boxes[i][2] / 2 < x1
                   for i in by_layer.get(li, ())):
                bad = True
                break
        if bad:
            continue
        shown.append((fid, p, piece))
    return shown


def group_frames(info: NodeInfo, layer: list[int], wsucc: list[list[int]],
                 wpred: list[list[int]], boxes: list[Box], sep: str) -> list[dict]:
    """Protocol group dicts: one frame per shown group (or per piece of a split group), with
    the nearest shown ancestor as ``parent``."""
    keep = set(info.framed)
    parent_of, children = _group_tree(keep, sep)
    rect = _group_rects(info, keep, children, boxes, sep)
    frames, split = _frames(info, keep, children, rect, layer, wsucc, wpred, boxes, sep)
    keep -= _overlapping_siblings(info, keep, split, parent_of, rect, sep)
    frames = [f for f in frames if f[1] in keep]
    shown = _honest_frames(info, frames, rect, layer, boxes, sep)
    visible = {p for _, p, _ in shown}
    groups_out = []
    for fid, p, piece in shown:
        x0, y0, x1, y1 = rect[fid]
        parent = parent_of[p]
        while parent is not None and parent not in visible:
            parent = parent_of[parent]
        groups_out.append({
            "id": fid, "label": p, "fold_id": p, "x": round(x0, 1), "y": round(y0, 1),
            "w": round(x1 - x0, 1), "h": round(y1 - y0, 1),
            "members": [str(info.ids[i]) for i in piece],
            "depth": p.count(sep) + 1, "parent": parent,
        })
    return groups_out


# --------------------------------------------------------------------------- the scene

def fit_to_margin(nodes_out: list[dict], edges_out: list[dict], groups_out: list[dict],
                  boxes: list[Box]) -> tuple[float, float]:
    """Translate everything (frames included) to start at the outer margin; returns the
    scene's width and height."""
    x_min = min([b[0] for b in boxes] + [g["x"] for g in groups_out], default=0.0)
    y_min = min([b[1] for b in boxes] + [g["y"] for g in groups_out], default=0.0)
    dx, dy = round(OUTER_MARGIN - x_min, 1), round(OUTER_MARGIN - y_min, 1)
    if dx or dy:
        for item in nodes_out + groups_out:
            item["x"] = round(item["x"] + dx, 1)
            item["y"] = round(item["y"] + dy, 1)
        for e in edges_out:
            e["points"] = [[round(px + dx, 1), round(py + dy, 1)] for px, py in e["points"]]
        boxes = [(b[0] + dx, b[1] + dy, b[2], b[3]) for b in boxes]
    xs = [b[0] + b[2] for b in boxes] + [g["x"] + g["w"] for g in groups_out]
    ys = [b[1] + b[3] for b in boxes] + [g["y"] + g["h"] for g in groups_out]
    return (round(max(xs, default=0.0) + OUTER_MARGIN, 1),
            round(max(ys, default=0.0) + OUTER_MARGIN, 1))
