"""Dynamic shapes: a token MLP block whose batch and sequence length are symbolic (x: (batch, seq, 32)).

`get_dynamic_shapes()` marks dims 0 and 1 of the input dynamic with torch.export.Dim, so the FX,
Relax and TensorIR views show `batch` and `seq` instead of numbers, and one build serves every
size.  `get_alt_inputs()` gives a second input size; the test (and `irviz check`, when it runs the
alternative inputs) checks the built module on both sizes against PyTorch.

Note torch.export specialises sizes 0 and 1: example sizes of dynamic dims must be >= 2.
"""
import torch
from torch import nn

WIDTH = 32


class TokenMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.up = nn.Linear(WIDTH, 4 * WIDTH)
        self.act = nn.GELU()
        self.down = nn.Linear(4 * WIDTH, WIDTH)
        self.head = nn.Linear(WIDTH, 10)

    def forward(self, x):
        x = x + self.down(self.act(self.up(self.norm(x))))
        # mean over the (dynamic) sequence, then a classifier: (batch, 10)
        return self.head(x.mean(dim=1))


def get_model():
    torch.manual_seed(0)
    return TokenMLP().eval(), (torch.randn(2, 8, WIDTH),)


def get_dynamic_shapes():
    batch = torch.export.Dim("batch", min=2, max=64)
    seq = torch.export.Dim("seq", min=2, max=256)
    return {"x": {0: batch, 1: seq}}


def get_alt_inputs():
    g = torch.Generator().manual_seed(1)
    return (torch.randn(5, 13, WIDTH, generator=g),)
