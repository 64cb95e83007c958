"""MobileNet-V2 at its published size (width 1.0, 224x224, 1000 classes), written out in plain torch
because torchvision does not load here; random weights."""
import torch
from torch import nn


def _conv_bn(cin, cout, k, stride, groups=1, act=True):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, nn.ReLU6()) if act else nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        mid = cin * expand
        self.use_res = stride == 1 and cin == cout
        body = [_conv_bn(cin, mid, 1, 1)] if expand != 1 else []
        body += [_conv_bn(mid, mid, 3, stride, groups=mid), _conv_bn(mid, cout, 1, 1, act=False)]
        self.body = nn.Sequential(*body)

    def forward(self, x):
        y = self.body(x)
        return x + y if self.use_res else y


class MobileNetV2(nn.Module):
    # (expansion, output channels, repeats, first stride): table 2 of the MobileNetV2 paper
    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1)]

    def __init__(self, classes=1000):
        super().__init__()
        layers, cin = [_conv_bn(3, 32, 3, 2)], 32
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(_conv_bn(cin, 1280, 1, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, classes)

    def forward(self, x):
        return self.classifier(self.features(x).mean((2, 3)))


def calibrated(model: nn.Module, batch: torch.Tensor) -> nn.Module:
    """Batch norms given the statistics of one batch, as training would leave them: with the
    defaults (mean 0, variance 1) the activations shrink ~1e8-fold over the 52 convolutions, the
    output is the classifier's bias, and any compiler "matches" torch."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for bn in bns:
        bn.momentum = 1.0
    model.train()
    with torch.no_grad():
        model(batch)
    for bn in bns:
        bn.momentum = 0.1
    return model.eval()


def get_model():
    torch.manual_seed(0)
    return calibrated(MobileNetV2(), torch.randn(4, 3, 224, 224)), (torch.randn(1, 3, 224, 224),)
