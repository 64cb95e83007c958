"""Per FX node, the TVM kernel and the Inductor kernel(s) that compute it, their times, and which
side is faster; and where TVM loses and wins most.

A fused kernel computes several FX nodes; its time is split evenly among the FX nodes it computes
(``attribution``), so a node's figures add up to its kernels' and the nodes' to the total. A node
computed by several kernels (Inductor's layout copy of a convolution's input, then the convolution)
gets its share of each. A node no kernel computes on a side (a view, a reshape folded into its
neighbour, a weight transform done once at build, or a node provenance lost) has no time there:
None, not 0, and the row gives no verdict.
"""
from __future__ import annotations

from irviz.core.backend.intermediates_match import match_values

__all__ = ["ATTRIBUTION", "by_fx_node", "computing_nodes", "kernel_fx_nodes", "summary"]

ATTRIBUTION = ("a fused kernel's time is split evenly among the FX nodes it computes; a node "
               "computed by several kernels gets its share of each")

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


def by_fx_node(graph, tvm_kernels: list[dict], peer_kernels: list[dict]) -> list[dict]:
    """A row per computing FX node (FX order): {"fx_node", "target", "tvm": side, "inductor":
    side, "faster", "diff_ms"}; `*_kernels` are dicts with "name", "ms", "fx_nodes"."""
    rows = []
    for n in computing_nodes(graph):
        tvm, ind = _side(n.name, tvm_kernels), _side(n.name, peer_kernels)
        diff = faster = None
        if tvm["ms"] is not None and ind["ms"] is not None:
            diff = round(tvm["ms"] - ind["ms"], 5)
            faster = "tvm" if diff < 0 else "inductor" if diff > 0 else "same"
        # with no kernel on one side the node may be free there (a view) or only unmapped
        # (provenance lost it): no verdict rather than a guessed one
        rows.append({"fx_node": n.name, "target": n.target, "tvm": tvm, "inductor": ind,
                     "faster": faster, "diff_ms": diff})
    return rows


def summary(rows: list[dict], most: int = 10) -> dict:
    """Where TVM loses and wins most, by the node's time difference (TVM - Inductor)."""
    judged = [r for r in rows if r["diff_ms"] is not None]
    loses = sorted((r for r in judged if r["diff_ms"] > 0), key=lambda r: -r["diff_ms"])
    wins = sorted((r for r in judged if r["diff_ms"] < 0), key=lambda r: r["diff_ms"])

    def line(r):
        t, i = r["tvm"], r["inductor"]
        return {"fx_node": r["fx_node"], "diff_ms": r["diff_ms"],
                "text": f"{r['fx_node']}: TVM {_k(t)} {_ms(t['ms'])} vs Inductor {_k(i)} {_ms(i['ms'])}"}

    return {"tvm_loses": [line(r) for r in loses[:most]], "tvm_wins": [line(r) for r in wins[:most]],
            "tvm_loses_ms": round(sum(r["diff_ms"] for r in loses), 5),
            "tvm_wins_ms": round(-sum(r["diff_ms"] for r in wins), 5),
            "most_different": [r["fx_node"] for r in sorted(judged, key=lambda r: -abs(r["diff_ms"]))[:most]]}


def _k(side: dict) -> str:
    return "+".join(side["kernels"]) if side["kernels"] else "(no kernel)"


def _ms(x) -> str:
    return "-" if x is None else f"{x:.3f} ms"
