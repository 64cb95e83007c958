"""split_at_graph_breaks keeps a graph for every call of a frame, past torch's recompile limit."""
from __future__ import annotations

import torch

from irviz.core.frontend.break_capture import split_at_graph_breaks
from irviz.core.frontend.model_file import LoadedModel


class Halves(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        torch._dynamo.graph_break()
        return y + 1


class Tower(torch.nn.Module):
    """Encodec's pattern: one submodule with a graph break run at twelve lengths, a frame that
    torch.compile compiles again for each (past 8 it would run eagerly, in no graph)."""

    def __init__(self):
        super().__init__()
        self.halves = Halves()

    def forward(self, x):
        return sum(self.halves(x[:n]).sum() for n in range(1, 13))


def test_every_length_gets_its_graphs():
    pieces = split_at_graph_breaks(LoadedModel(module=Tower(), example_inputs=(torch.randn(16),),
                                               spec="m", name="m"))
    lengths = sorted({p.example_inputs[0].shape[0] for p in pieces})
    assert lengths == list(range(1, 13)) and len(pieces) == 24
