"""A multilayer perceptron: the smallest model every strategy applies to (data, parameter and
reduction splits of each Linear), for runtime checks and cost-model fidelity runs."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    """`layers` hidden Linear + ReLU layers of `hidden` units, then a classifier; forward is the
    cross-entropy loss of (features [B, inputs], labels [B])."""

    def __init__(self, inputs: int = 1024, hidden: int = 1024, layers: int = 3, classes: int = 10):
        super().__init__()
        widths = [inputs, *[hidden] * layers]
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))
        self.out = nn.Linear(widths[-1], classes)

    def forward(self, features: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x = features
        for layer in self.hidden:
            x = F.relu(layer(x))
        return F.cross_entropy(self.out(x), labels)
