"""Nodes that are bookkeeping rather than computation, and a graph without them.

torch.export leaves checks and copies in the graph that say nothing about the model:
``_assert_tensor_metadata`` (and the other asserts), and a ``clone`` (or ``lift_fresh_copy``,
``detach``) of every lifted constant.  In a transformers model they are a fifth of the nodes, and
being sources they sit at the top, where a graph opens.  The Relax graph has its own: aliases
(``y = x``) and scalar constants (``add(x, 1.0)`` draws a box for ``1.0``).

``without_bookkeeping(G, style)`` removes them: a node with no users goes, a copy is bypassed (its
input feeds its users).  No Qt, no TVM.
"""
from __future__ import annotations

import networkx as nx

ASSERT_TARGETS = ("aten._assert_tensor_metadata", "aten._assert_scalar", "aten._assert_async",
                  "aten.sym_constrain_range", "aten._functional_sym_constrain_range",
                  "aten.sym_constrain_range_for_size")
COPY_TARGETS = ("aten.clone", "aten.lift_fresh_copy", "aten.detach", "aten.alias")
CONSTANT_KINDS = ("constant", "buffer", "parameter", "const", "param")


def _target(d: dict) -> str:
    return str(d.get("target") or "")


def _is_target(d: dict, names) -> bool:
    t = _target(d)
    return any(t == n or t.startswith(n + ".") for n in names)


def fx_bookkeeping(G: nx.DiGraph) -> list:
    """Asserts, and copies of lifted constants (a copy whose input is a constant placeholder)."""
    out = []
    for n, d in G.nodes(data=True):
        if _is_target(d, ASSERT_TARGETS) and G.out_degree(n) == 0:
            out.append(n)
        elif _is_target(d, COPY_TARGETS) and G.in_degree(n) == 1:
            (src,) = G.predecessors(n)
            if str(G.nodes[src].get("kind", "")) in CONSTANT_KINDS:
                out.append(n)
    return out


def relax_bookkeeping(G: nx.DiGraph) -> list:
    """Aliases (``y = x``) and scalar constants."""
    out = []
    for n, d in G.nodes(data=True):
        if d.get("op") == "alias" and G.in_degree(n) == 1:
            out.append(n)
        elif d.get("kind") == "const" and d.get("shape") in ((), [], None) and G.in_degree(n) == 0:
            out.append(n)
    return out


def without_bookkeeping(G: nx.DiGraph, style: str = "fx", keep=()) -> tuple[nx.DiGraph, list[str]]:
    """(a copy of G without its bookkeeping nodes, their ids).  ``keep``: ids never hidden (e.g.
    the node an import failed at)."""
    find = fx_bookkeeping if style == "fx" else relax_bookkeeping
    keep = {str(k) for k in keep}
    hidden = [n for n in find(G) if str(n) not in keep]
    if not hidden:
        return G, []
    H = G.copy()
    for n in hidden:
        preds = list(H.predecessors(n))
        for s in H.successors(n):
            for p in preds:
                if not H.has_edge(p, s):
                    H.add_edge(p, s, **H.edges[n, s])
        H.remove_node(n)
    return H, [str(n) for n in hidden]
