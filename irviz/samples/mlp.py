"""FashionMNIST MLP from the course: 784 -> 128 -> ReLU -> 10, input (1, 784)."""
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear0 = nn.Linear(784, 128)
        self.relu = nn.ReLU()
        self.linear1 = nn.Linear(128, 10)

    def forward(self, x):
        return self.linear1(self.relu(self.linear0(x)))


def get_model():
    torch.manual_seed(0)
    return MLP().eval(), (torch.randn(1, 784),)
