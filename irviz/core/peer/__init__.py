"""A peer compiler beside TVM: torch.compile (Inductor, CPU) on the same captured program, its
kernels, the FX nodes each computes, their times, and the two compilers side by side per FX node.

    report = inductor_peer(captured, threads=1, tvm_kernels=[...], tvm_fx=kernel_fx_nodes(step, graph))
    report["kernels"], report["by_fx_node"], report["summary"]

A model Inductor cannot compile gives ``{"compiler": "inductor", "error": why}`` and no exception.
"""
from __future__ import annotations

from irviz.core.peer.peer_report import inductor_peer
from irviz.core.peer.side_by_side import kernel_fx_nodes

__all__ = ["inductor_peer", "kernel_fx_nodes"]
