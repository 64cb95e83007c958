"""Uses aten.erfinv, which TVM 0.27 cannot import: try --converters irviz/samples/example_converter.py.

A small "Gaussianize" network: Linear -> tanh (squashed into (-0.9, 0.9)) -> erfinv -> Linear.
Importing it fails with an error naming the FX node (erfinv), its op (aten.erfinv.default), its
input shape and the module it sits in (gauss, GaussianQuantile).  The example converter file in
the same folder supplies the missing converter, and the model then imports, builds and matches
PyTorch:

    irviz check sample:unsupported_op --converters irviz/samples/example_converter.py
"""
import math

import torch
from torch import nn


class GaussianQuantile(nn.Module):
    """Map values in (-1, 1) to standard-normal quantiles: sqrt(2) * erfinv(x)."""

    def forward(self, x):
        return math.sqrt(2.0) * torch.erfinv(x)


class Gaussianize(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.gauss = GaussianQuantile()
        self.out = nn.Linear(32, 8)

    def forward(self, x):
        h = 0.9 * torch.tanh(self.inp(x))
        return self.out(self.gauss(h))


def get_model():
    torch.manual_seed(0)
    return Gaussianize().eval(), (torch.randn(4, 16),)
