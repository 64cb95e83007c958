"""A MobileNet-V2-shaped CNN in plain torch (inverted residuals, depthwise convolutions, ReLU6),
at 64x64: torchvision does not load here, so it is written out as a user would."""
import torch
from torch import nn


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        mid = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(),
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.body(x)
        return x + y if self.use_res else y


class MobileNetLike(nn.Module):
    def __init__(self, classes=100):
        super().__init__()
        layers = [nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6()]
        cin = 16
        for cout, stride in [(16, 1), (24, 2), (24, 1), (32, 2), (32, 1), (64, 2), (64, 1)]:
            layers.append(InvertedResidual(cin, cout, stride, 4))
            cin = cout
        layers += [nn.Conv2d(cin, 256, 1, bias=False), nn.BatchNorm2d(256), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(256, classes)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))


def get_model():
    torch.manual_seed(0)
    model = MobileNetLike()
    # batch norms with one batch's statistics, as training leaves them: with the defaults the
    # features shrink to ~1e-4 and the output is the head's bias, which any compiler "matches"
    for bn in (m for m in model.modules() if isinstance(m, nn.BatchNorm2d)):
        bn.momentum = 1.0
    with torch.no_grad():
        model.train()(torch.randn(8, 3, 64, 64))
    return model.eval(), (torch.randn(1, 3, 64, 64),)
