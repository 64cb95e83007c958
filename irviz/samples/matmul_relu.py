"""The course's MyModel: x @ W (128x128 parameter) then relu, input (1, 128)."""
import torch
from torch import nn


class MatmulRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(128, 128))

    def forward(self, x):
        return torch.relu(torch.matmul(x, self.weight))


def get_model():
    torch.manual_seed(0)
    return MatmulRelu().eval(), (torch.randn(1, 128),)
