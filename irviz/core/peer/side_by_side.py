"""Per FX node, the TVM kernel and the Inductor kernel(s) that compute it, their times, and which
side is faster; and where TVM loses and wins most.

A fused kernel computes several FX nodes; its time is split evenly among the FX nodes it computes
(``ATTRIBUTION``), so a node's figures add up to its kernels' and the nodes' to the total. A node
computed by several kernels (Inductor's layout copy of a convolution's input, then the convolution)
gets its share of each. A node no kernel computes on a side (a view, a reshape folded into its
neighbour, a weight transform done once at build, or a node provenance lost) has no time there:
None, not 0.

A node's share is no fair verdict where the two fuse differently: TVM's conv+bias+relu kernel gives
the conv a third of its time, Inductor's library convolution gives it all. So the verdict is taken
per group: FX nodes joined where one kernel computes two neighbours, on either side, so each group
is computed by whole kernels on both; its time on a side is the sum of its nodes' shares. A row's
"faster" is its group's; the summary ranks groups.
"""
from __future__ import annotations

from irviz.core.backend.intermediates_match import match_values
from irviz.core.peer.plausible import implausible, node_flop

__all__ = ["ATTRIBUTION", "by_fx_node", "computing_nodes", "groups", "kernel_fx_calls", "kernel_fx_nodes",
           "summary"]

ATTRIBUTION = ("a fused kernel's time is split evenly among the FX nodes it computes (a node computed by "
               "several kernels gets its share of each); who is faster is judged per group of FX nodes "
               "that whole kernels compute on both sides")

_SKIP = {"parameter", "buffer", "constant", "input", "output"}


def computing_nodes(graph) -> list:
    """The FX nodes that compute something: the ops (not inputs, weights or the output)."""
    return [n for n in graph.nodes if n.kind not in _SKIP and n.op == "call_function"]


def kernel_fx_nodes(step, graph) -> dict[str, list[str]]:
    """TVM: function name -> the FX nodes it computes at `step`, in FX order, from the same
    provenance the intermediates comparison uses (a node fused into a kernel belongs to it)."""
    m = match_values(step, graph, _SKIP)
    out: dict[str, list[str]] = {}
    for n in graph.nodes:
        k = m.kernel.get(n.name)
        if k is not None:
            out.setdefault(k, []).append(n.name)
    return out


def kernel_fx_calls(step, graph) -> dict[str, dict[str, str]]:
    """TVM: function name -> {FX node: the binding that calls it}: a function called twice (one
    fused function for two residual blocks) computes each block's nodes in a call of its own."""
    m = match_values(step, graph, _SKIP)
    out: dict[str, dict[str, str]] = {}
    for n in graph.nodes:
        k = m.kernel.get(n.name)
        call = m.chosen.get(n.name) or m.binding_of.get(n.name)  # a node inside the call: its binding
        if k is not None and call is not None:
            out.setdefault(k, {})[n.name] = str(call)
    return out


def _side(node: str, kernels: list[dict]) -> dict:
    """One side of a row: the kernels computing `node`, their times, and `node`'s share."""
    mine = [k for k in kernels if node in k.get("fx_nodes", ())]
    if not mine:
        return {"kernels": [], "kernel_ms": None, "ms": None}
    timed = [k for k in mine if k.get("ms") is not None]
    share = sum(k["ms"] / len(k["fx_nodes"]) for k in timed) if timed else None
    return {"kernels": [k["name"] for k in mine],
            "kernel_ms": round(sum(k["ms"] for k in timed), 5) if timed else None,
            "ms": None if share is None else round(share, 5)}


def _group_of(graph, nodes: list[str], sides: list[list[dict]]) -> dict[str, str]:
    """FX node -> its group's first node: neighbours (an edge of the FX graph) that one call of a
    kernel computes are joined, on either side. A kernel called twice (one fused function for two
    layers) computes two separate neighbourhoods, which stay apart: its "fx_calls" ({FX node:
    call}) tells them apart where a residual edge runs from one call's nodes to the other's; a node
    with no call of its own takes its neighbours' (``_calls_of_added``)."""
    parent = {n: n for n in nodes}

    def find(n):
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    by = {n.name: n for n in graph.nodes}
    order = {n: i for i, n in enumerate(nodes)}
    for kernels in sides:
        for k in kernels:
            mine = set(k.get("fx_nodes") or ()) & parent.keys()
            calls = k.get("fx_calls") or {}
            several = len(set(calls.values())) > 1
            if several:
                calls = _calls_of_added(by, mine, calls)
            for n in mine:
                for a in by[n].args:
                    if a in mine and (calls.get(a) is not None and calls.get(a) == calls.get(n) if several
                                      else a not in calls or n not in calls or calls[a] == calls[n]):
                        ra, rb = find(a), find(n)
                        if ra != rb:
                            first, other = (ra, rb) if order[ra] < order[rb] else (rb, ra)
                            parent[other] = first
    return {n: find(n) for n in nodes}


def _calls_of_added(by: dict, mine: set[str], calls: dict[str, str]) -> dict[str, str]:
    """`calls` with each node of a kernel called for several layers that has no call of its own
    (added from a neighbour's provenance) given the one call its neighbours in the kernel share;
    a node whose neighbours are in several calls, or in none, stays without one and joins nothing
    through this kernel: joined, BERT's softmax nodes in Inductor's per-layer permute kernel
    chained all 12 layers into one group."""
    out = dict(calls)
    users: dict[str, set[str]] = {}
    for n in mine:
        for a in by[n].args:
            users.setdefault(a, set()).add(n)
    for n in mine - calls.keys():
        near = {calls[m] for m in (set(by[n].args) | users.get(n, set())) & mine if m in calls}
        if len(near) == 1:
            out[n] = near.pop()
    return out


def _verdict(tvm_ms, ind_ms):
    if tvm_ms is None or ind_ms is None:
        # with no kernel on one side the nodes may be free there (views) or only unmapped
        # (provenance lost them): no verdict rather than a guessed one
        return None, None
    diff = round(tvm_ms - ind_ms, 5)
    return diff, "tvm" if diff < 0 else "inductor" if diff > 0 else "same"


def groups(rows: list[dict]) -> list[dict]:
    """The groups of `rows` (by_fx_node's), in FX order: their nodes, kernels and summed shares."""
    out: dict[str, dict] = {}
    for r in rows:
        g = out.setdefault(r["group"], {"group": r["group"], "fx_nodes": [], "tvm_kernels": [],
                                        "inductor_kernels": [], "tvm_ms": None, "inductor_ms": None,
                                        "flop": 0.0, "unsure": None})
        g["fx_nodes"].append(r["fx_node"])
        g["flop"] = None if g["flop"] is None or r.get("flop") is None else g["flop"] + r["flop"]
        g["unsure"] = g["unsure"] or r.get("unsure")
        for side, key in (("tvm", "tvm_kernels"), ("inductor", "inductor_kernels")):
            g[key] += [k for k in r[side]["kernels"] if k not in g[key]]
            if r[side]["ms"] is not None:
                g[f"{side}_ms"] = round((g[f"{side}_ms"] or 0.0) + r[side]["ms"], 5)
    for g in out.values():
        g["diff_ms"], g["faster"] = _verdict(g["tvm_ms"], g["inductor_ms"])
        if g["unsure"]:  # a time that cannot be true judges nothing
            g["faster"] = None
    return list(out.values())


def by_fx_node(graph, tvm_kernels: list[dict], peer_kernels: list[dict], peak_gflops: float | None = None
               ) -> list[dict]:
    """A row per computing FX node (FX order): {"fx_node", "target", "tvm": side, "inductor":
    side, "diff_ms" (the node's shares), "flop" (a lower bound), "group", "faster" (its group's),
    "unsure" (why its group's time cannot be true: faster than `peak_gflops`, or None)};
    `*_kernels` are dicts with "name", "ms", "fx_nodes"."""
    nodes = computing_nodes(graph)
    group = _group_of(graph, [n.name for n in nodes], [tvm_kernels, peer_kernels])
    by = {n.name: n for n in graph.nodes}
    rows = []
    for n in nodes:
        tvm, ind = _side(n.name, tvm_kernels), _side(n.name, peer_kernels)
        rows.append({"fx_node": n.name, "target": n.target, "tvm": tvm, "inductor": ind,
                     "diff_ms": _verdict(tvm["ms"], ind["ms"])[0], "flop": node_flop(by, n.name),
                     "group": group[n.name], "unsure": None})
    unsure = {g["group"]: implausible(g, peak_gflops) for g in groups(rows)}
    for r in rows:
        r["unsure"] = unsure[r["group"]]
    faster = {g["group"]: g["faster"] for g in groups(rows)}
    for r in rows:
        r["faster"] = faster[r["group"]]
    return rows


def summary(rows: list[dict], most: int = 10) -> dict:
    """Where TVM loses and wins most: the groups by their time difference (TVM - Inductor)."""
    everything = groups(rows)
    judged = [g for g in everything if g["diff_ms"] is not None and not g["unsure"]]
    loses = sorted((g for g in judged if g["diff_ms"] > 0), key=lambda g: -g["diff_ms"])
    wins = sorted((g for g in judged if g["diff_ms"] < 0), key=lambda g: g["diff_ms"])
    return {"tvm_loses": [_line(g) for g in loses[:most]], "tvm_wins": [_line(g) for g in wins[:most]],
            "tvm_loses_ms": round(sum(g["diff_ms"] for g in loses), 5),
            "tvm_wins_ms": round(-sum(g["diff_ms"] for g in wins), 5),
            "most_different": [_line(g) for g in sorted(judged, key=lambda g: -abs(g["diff_ms"]))[:most]],
            "unsure": [_line(g) for g in everything if g["unsure"]]}


def _line(g: dict) -> dict:
    nodes = g["fx_nodes"]
    what = nodes[0] if len(nodes) == 1 else f"{nodes[0]}..{nodes[-1]} ({len(nodes)} nodes)"
    text = (f"{what}: TVM {'+'.join(g['tvm_kernels'])} {_ms(g['tvm_ms'])} ms vs Inductor "
            f"{'+'.join(g['inductor_kernels'])} {_ms(g['inductor_ms'])} ms")
    return {**g, "text": text + (f" (unsure: {g['unsure']})" if g["unsure"] else "")}


def _ms(x) -> str:
    return "-" if x is None else f"{x:.3f}"
