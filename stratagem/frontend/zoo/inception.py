"""Inception-v3 (Szegedy et al. 2016) as torchvision lays it out, on 299x299 images.

Without the auxiliary classifier it has 23,834,568 parameters (torchvision: 27,161,264 with it);
the zoo trains it without, so the loss is the main head's cross-entropy. `narrow` divides every
channel count (the tiny variant), keeping the structure.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from stratagem.frontend.zoo.vision import Classifier


class BasicConv(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int | tuple[int, int], stride: int = 1,
                 padding: int | tuple[int, int] = 0):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride, padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)))


def _chain(*convs: nn.Module) -> nn.Sequential:
    return nn.Sequential(*convs)


class InceptionA(nn.Module):
    def __init__(self, cin: int, pool: int, n):
        super().__init__()
        self.b1 = BasicConv(cin, n(64), 1)
        self.b5 = _chain(BasicConv(cin, n(48), 1), BasicConv(n(48), n(64), 5, padding=2))
        self.b3 = _chain(BasicConv(cin, n(64), 1), BasicConv(n(64), n(96), 3, padding=1),
                         BasicConv(n(96), n(96), 3, padding=1))
        self.pool = BasicConv(cin, pool, 1)
        self.out_channels = n(64) + n(64) + n(96) + pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = self.pool(F.avg_pool2d(x, 3, 1, 1))
        return torch.cat([self.b1(x), self.b5(x), self.b3(x), pooled], 1)


class InceptionB(nn.Module):
    def __init__(self, cin: int, n):
        super().__init__()
        self.b3 = BasicConv(cin, n(384), 3, stride=2)
        self.b3dbl = _chain(BasicConv(cin, n(64), 1), BasicConv(n(64), n(96), 3, padding=1),
                            BasicConv(n(96), n(96), 3, stride=2))
        self.out_channels = n(384) + n(96) + cin

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b3(x), self.b3dbl(x), F.max_pool2d(x, 3, 2)], 1)


class InceptionC(nn.Module):
    def __init__(self, cin: int, c7: int, n):
        super().__init__()
        self.b1 = BasicConv(cin, n(192), 1)
        self.b7 = _chain(BasicConv(cin, c7, 1), BasicConv(c7, c7, (1, 7), padding=(0, 3)),
                         BasicConv(c7, n(192), (7, 1), padding=(3, 0)))
        self.b7dbl = _chain(BasicConv(cin, c7, 1), BasicConv(c7, c7, (7, 1), padding=(3, 0)),
                            BasicConv(c7, c7, (1, 7), padding=(0, 3)),
                            BasicConv(c7, c7, (7, 1), padding=(3, 0)),
                            BasicConv(c7, n(192), (1, 7), padding=(0, 3)))
        self.pool = BasicConv(cin, n(192), 1)
        self.out_channels = 4 * n(192)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = self.pool(F.avg_pool2d(x, 3, 1, 1))
        return torch.cat([self.b1(x), self.b7(x), self.b7dbl(x), pooled], 1)


class InceptionD(nn.Module):
    def __init__(self, cin: int, n):
        super().__init__()
        self.b3 = _chain(BasicConv(cin, n(192), 1), BasicConv(n(192), n(320), 3, stride=2))
        self.b7x3 = _chain(BasicConv(cin, n(192), 1), BasicConv(n(192), n(192), (1, 7), padding=(0, 3)),
                           BasicConv(n(192), n(192), (7, 1), padding=(3, 0)),
                           BasicConv(n(192), n(192), 3, stride=2))
        self.out_channels = n(320) + n(192) + cin

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b3(x), self.b7x3(x), F.max_pool2d(x, 3, 2)], 1)


class InceptionE(nn.Module):
    def __init__(self, cin: int, n):
        super().__init__()
        self.b1 = BasicConv(cin, n(320), 1)
        self.b3 = BasicConv(cin, n(384), 1)
        self.b3a = BasicConv(n(384), n(384), (1, 3), padding=(0, 1))
        self.b3b = BasicConv(n(384), n(384), (3, 1), padding=(1, 0))
        self.dbl = _chain(BasicConv(cin, n(448), 1), BasicConv(n(448), n(384), 3, padding=1))
        self.dbla = BasicConv(n(384), n(384), (1, 3), padding=(0, 1))
        self.dblb = BasicConv(n(384), n(384), (3, 1), padding=(1, 0))
        self.pool = BasicConv(cin, n(192), 1)
        self.out_channels = n(320) + 4 * n(384) + n(192)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.b3(x)
        dbl = self.dbl(x)
        pooled = self.pool(F.avg_pool2d(x, 3, 1, 1))
        return torch.cat([self.b1(x), self.b3a(b3), self.b3b(b3), self.dbla(dbl), self.dblb(dbl), pooled], 1)


class InceptionV3(Classifier):
    def __init__(self, classes: int = 1000, narrow: int = 1, dropout: float = 0.5):
        super().__init__()

        def n(channels: int) -> int:
            return max(1, channels // narrow)

        self.stem = _chain(BasicConv(3, n(32), 3, stride=2), BasicConv(n(32), n(32), 3),
                           BasicConv(n(32), n(64), 3, padding=1), nn.MaxPool2d(3, 2),
                           BasicConv(n(64), n(80), 1), BasicConv(n(80), n(192), 3), nn.MaxPool2d(3, 2))
        blocks: list[nn.Module] = []
        cin = n(192)
        for make in (lambda c: InceptionA(c, n(32), n), lambda c: InceptionA(c, n(64), n),
                     lambda c: InceptionA(c, n(64), n), lambda c: InceptionB(c, n),
                     lambda c: InceptionC(c, n(128), n), lambda c: InceptionC(c, n(160), n),
                     lambda c: InceptionC(c, n(160), n), lambda c: InceptionC(c, n(192), n),
                     lambda c: InceptionD(c, n), lambda c: InceptionE(c, n), lambda c: InceptionE(c, n)):
            block = make(cin)
            blocks.append(block)
            cin = block.out_channels
        self.blocks = nn.Sequential(*blocks)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(cin, classes)

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(images))
        return self.fc(self.dropout(F.adaptive_avg_pool2d(x, 1).flatten(1)))
