"""Small CNN: conv 3->8 + batchnorm (eval) + relu + flatten + linear, input (1, 3, 8, 8)."""
import torch
from torch import nn


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(torch.flatten(x, 1))


def get_model():
    torch.manual_seed(0)
    m = SmallCNN().eval()
    with torch.no_grad():  # non-trivial running statistics, so eval-mode batchnorm matters
        m.bn.running_mean.uniform_(-0.1, 0.1)
        m.bn.running_var.uniform_(0.5, 1.5)
        m.bn.weight.uniform_(0.5, 1.5)
        m.bn.bias.uniform_(-0.1, 0.1)
    return m, (torch.randn(1, 3, 8, 8),)
