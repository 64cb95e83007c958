"""Inductor's node names -> the FX graph irviz shows.

Inductor's provenance names the nodes of the graph Dynamo gave it (pre-grad). That graph is Dynamo's
trace of the decomposed ExportedProgram's module, so it calls the same ATen ops in the same order
as irviz's FX graph, but under its own names (``_native_batch_norm_legit_no_training_default`` for
irviz's ``_native_batch_norm_legit_no_training``). Names are therefore not trusted: the two op
sequences are aligned by target, and a pre-grad node maps to the FX node at the same place with the
same target. Nodes the alignment leaves over map by name only where the target agrees too.
"""
from __future__ import annotations

import difflib

__all__ = ["feeding_claimed", "inside_inserted", "pre_grad_to_fx"]


def pre_grad_to_fx(pre: list[tuple[str, str]], graph) -> dict[str, str]:
    """{pre-grad node name: irviz FX node name} for every op (`pre`: (name, target) of the ops
    Dynamo gave Inductor, in order) that has one."""
    fx = [(n.name, n.target) for n in graph.nodes if n.op == "call_function"]
    out: dict[str, str] = {}
    sm = difflib.SequenceMatcher(a=[t for _, t in pre], b=[t for _, t in fx], autojunk=False)
    for block in sm.get_matching_blocks():
        for k in range(block.size):
            out[pre[block.a + k][0]] = fx[block.b + k][0]
    taken = set(out.values())
    fx_target = dict(fx)
    for name, target in pre:
        if name not in out and fx_target.get(name) == target and name not in taken:
            out[name] = name
            taken.add(name)
    return out



def inside_inserted(graph, claims: dict[str, set[str]], inserting: set[str]) -> dict[str, str]:
    """{FX node: kernel} for the nodes no kernel claims that lie inside a kernel that computes an
    op Inductor inserted in place of a subgraph (attention matched into one
    scaled_dot_product call): provenance names only the new op, which the FX graph does not have.
    A node counts as inside kernel K when every nearest claimed node above it (through unclaimed
    nodes) is K's. `claims`: {FX node: kernels computing it}; `inserting`: kernels with such an op."""
    above: dict[str, set[str]] = {}
    out: dict[str, str] = {}
    for n in graph.nodes:  # FX order is topological
        if n.name in claims:
            above[n.name] = set(claims[n.name])
            continue
        ks = set().union(*(above.get(a, set()) for a in n.args)) if n.args else set()
        above[n.name] = ks
        if n.op == "call_function" and len(ks) == 1 and next(iter(ks)) in inserting:
            out[n.name] = next(iter(ks))
    return out


def feeding_claimed(graph, claims: dict[str, set[str]]) -> dict[str, set[str]]:
    """{FX node: kernels} for the ops no kernel claims that feed a claimed node only through other
    unclaimed ops, each given the kernels of the claimed nodes it feeds. Inductor's pattern
    rewrites keep the provenance of the last node they replace only: with freezing, a convolution,
    the batch norm folded into it and the add and relu fused after it become one mkldnn call that
    provenance ties to the relu alone. Ops of weights alone are left out: freezing computes them
    once at compile time, no kernel at run time. `claims`: {FX node: kernels computing it}."""
    runtime: set[str] = set()
    for n in graph.nodes:  # FX order is topological
        if n.kind == "input" or any(a in runtime for a in n.args):
            runtime.add(n.name)
    by = {n.name: n for n in graph.nodes}
    out: dict[str, set[str]] = {}
    for n in reversed(graph.nodes):  # every user of a node is met before the node
        ks = claims.get(n.name) or out.get(n.name)
        if not ks:
            continue
        for a in n.args:
            m = by.get(a)
            if m is not None and a not in claims and a in runtime and m.op == "call_function" and m.kind == "op":
                out.setdefault(a, set()).update(ks)
    return out
