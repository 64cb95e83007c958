"""The Relax bindings whose values diverge from torch at one step, for marking in a diff.

    marks = diverging_at(ws, k)       # after bisect found step k
    marks["first"]                    # the binding of the first diverging FX node (FX order)
    marks["bindings"]                 # {relax var: {"fx_node", "max_abs", "reason"}}

Built on the intermediates comparison (backend/intermediates.py): each FX node compared with the
binding provenance maps it to at that step. A wrong pass usually makes one binding wrong and
everything downstream of it follow, so ``first`` is the one to look at; the rest show how far the
error spread.
"""
from __future__ import annotations

__all__ = ["diverging_bindings", "diverging_at"]


def diverging_bindings(result) -> dict:
    """What to mark, from an IntermediatesResult; plain data (it goes to the GUI as is)."""
    bad = [n for n in result.nodes if n.status == "diverges" and n.relax_var]
    first = next((n.relax_var for n in bad if n.fx_node == result.first_divergence), None)
    return {"step": result.step, "pass": result.pass_name, "first": first,
            "first_fx": result.first_divergence,
            "compared": sum(1 for n in result.nodes if n.status != "unmatched"),
            "bindings": {n.relax_var: {"fx_node": n.fx_node, "max_abs": n.max_abs, "reason": n.reason}
                         for n in bad}}


def diverging_at(ws, index: int, *, atol=None, rtol=None) -> dict:
    """Compare intermediates at step `index` of a Workspace and return the bindings to mark."""
    return diverging_bindings(ws.compare_intermediates(index, rtol=rtol, atol=atol))
