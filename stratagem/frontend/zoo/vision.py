"""Image classifiers as plain modules (no torchvision here): LeNet, AlexNet, VGG16, ResNet and
Tofu's widened ResNets. Each forward takes (images, labels) and returns the cross-entropy loss.

Layouts follow torchvision's definitions (AlexNet 61.1M, VGG16 138.36M, ResNet-101 44.55M
parameters), so parameter counts match the published ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn


class Classifier(nn.Module):
    """Base: subclasses give `logits(images)`; forward is the training loss."""

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.logits(images), labels)


class LeNet(Classifier):
    """LeNet-5 on 28x28 single-channel images (FlexFlow §8.3's "6-layer CNN")."""

    def __init__(self, classes: int = 10, channels: Sequence[int] = (6, 16), hidden: Sequence[int] = (120, 84)):
        super().__init__()
        c1, c2 = channels
        self.conv1 = nn.Conv2d(1, c1, 5, padding=2)
        self.conv2 = nn.Conv2d(c1, c2, 5)
        self.fc1 = nn.Linear(c2 * 5 * 5, hidden[0])
        self.fc2 = nn.Linear(hidden[0], hidden[1])
        self.fc3 = nn.Linear(hidden[1], classes)

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(images)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc3(F.relu(self.fc2(x)))


def _mlp_head(inputs: int, hidden: int, classes: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(nn.Dropout(dropout), nn.Linear(inputs, hidden), nn.ReLU(),
                         nn.Dropout(dropout), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, classes))


class AlexNet(Classifier):
    """torchvision's AlexNet (the one-GPU variant of Krizhevsky's "one weird trick")."""

    def __init__(self, classes: int = 1000, width: Sequence[int] = (64, 192, 384, 256, 256),
                 hidden: int = 4096, pool: int = 6, dropout: float = 0.5):
        super().__init__()
        c1, c2, c3, c4, c5 = width
        self.features = nn.Sequential(
            nn.Conv2d(3, c1, 11, stride=4, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(c1, c2, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(c2, c3, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c3, c4, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c4, c5, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2))
        self.avgpool = nn.AdaptiveAvgPool2d(pool)
        self.classifier = _mlp_head(c5 * pool * pool, hidden, classes, dropout)

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.avgpool(self.features(images)).flatten(1))


VGG16_LAYERS = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


class VGG(Classifier):
    """VGG without batch norm; `layers` lists conv widths and "M" for 2x2 max pooling."""

    def __init__(self, layers: Sequence[int | str] = VGG16_LAYERS, classes: int = 1000,
                 hidden: int = 4096, pool: int = 7, dropout: float = 0.5):
        super().__init__()
        modules: list[nn.Module] = []
        channels = 3
        for item in layers:
            if item == "M":
                modules.append(nn.MaxPool2d(2, 2))
            else:
                modules += [nn.Conv2d(channels, int(item), 3, padding=1), nn.ReLU()]
                channels = int(item)
        self.features = nn.Sequential(*modules)
        self.avgpool = nn.AdaptiveAvgPool2d(pool)
        self.classifier = _mlp_head(channels * pool * pool, hidden, classes, dropout)

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.avgpool(self.features(images)).flatten(1))


def conv_bn(cin: int, cout: int, kernel: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False), nn.BatchNorm2d(cout))


class Bottleneck(nn.Module):
    """1x1 -> 3x3 (strided, as in torchvision's ResNet v1.5) -> 1x1 with 4x expansion."""

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        self.reduce = conv_bn(cin, width, 1)
        self.conv = conv_bn(width, width, 3, stride)
        self.expand = conv_bn(width, 4 * width, 1)
        self.shortcut = conv_bn(cin, 4 * width, 1, stride) if stride != 1 or cin != 4 * width else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.reduce(x))
        y = F.relu(self.conv(y))
        y = self.expand(y)
        return F.relu(y + (self.shortcut(x) if self.shortcut is not None else x))


RESNET_BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


class ResNet(Classifier):
    """Bottleneck ResNet. `widen` multiplies every conv's channels (Tofu's WResNet-L-W: "each
    weight tensor is widened on both the input and output channel"); widen=1 is ResNet-L."""

    def __init__(self, blocks: Sequence[int] = RESNET_BLOCKS[101], widen: int = 1, classes: int = 1000,
                 base: int = 64):
        super().__init__()
        stem = base * widen
        self.stem = conv_bn(3, stem, 7, 2)
        stages: list[nn.Module] = []
        cin = stem
        for i, count in enumerate(blocks):
            width = base * widen * 2 ** i
            stage = [Bottleneck(cin if j == 0 else 4 * width, width, 2 if i > 0 and j == 0 else 1)
                     for j in range(count)]
            stages.append(nn.Sequential(*stage))
            cin = 4 * width
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, classes)

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.stem(images)), 3, 2, 1)
        x = self.stages(x)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU())


class UNet(nn.Module):
    """U-Net (Ronneberger et al., MICCAI 2015) for per-pixel classes: per level two 3x3 convolutions
    (padded, so the output keeps the input's size) and a 2x2 max pool down; up, a x2 nearest
    upsampling and a 3x3 convolution halving the channels (the "up-convolution"), the skip
    concatenated, two 3x3 convolutions; a 1x1 convolution to the classes. The loss: per-pixel
    cross-entropy against masks [B, H, W]."""

    def __init__(self, classes: int = 2, widths: Sequence[int] = (64, 128, 256, 512, 1024), channels: int = 3):
        super().__init__()
        self.down = nn.ModuleList(double_conv(cin, cout) for cin, cout in zip((channels, *widths[:-1]), widths))
        self.up = nn.ModuleList(nn.Conv2d(cin, cout, 3, padding=1) for cin, cout in zip(widths[:0:-1], widths[-2::-1]))
        self.merge = nn.ModuleList(double_conv(2 * c, c) for c in widths[-2::-1])
        self.head = nn.Conv2d(widths[0], classes, 1)

    def forward(self, images: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
        skips, x = [], images
        for i, level in enumerate(self.down):
            x = level(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        for up, merge, skip in zip(self.up, self.merge, skips[-2::-1]):
            x = merge(torch.cat([up(F.interpolate(x, scale_factor=2, mode="nearest")), skip], dim=1))
        return F.cross_entropy(self.head(x), masks)
