"""A zoo model, declared once: how to build it (full size and tiny), its example inputs at the
papers' batch size, and the published size it should match."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

InputFactory = Callable[[int, torch.device, "torch.Generator | None"], tuple[Any, ...]]


@dataclass(frozen=True)
class Variant:
    """One buildable size: `build()` makes the module on the current default device;
    `inputs(batch_size, device, generator)` makes its example inputs (random on a real device)."""

    build: Callable[[], nn.Module]
    inputs: InputFactory
    batch_size: int


@dataclass(frozen=True)
class Published:
    """A published parameter count; `source` says where it comes from (and, when the paper gives
    bytes, how the count follows from them)."""

    parameters: int
    source: str


@dataclass(frozen=True)
class ZooEntry:
    name: str
    full: Variant
    tiny: Variant
    source: str                        # the paper and setting the model reproduces
    published: Published | None = None
    notes: str = ""                    # architecture choices the papers leave open
    requires: str = ""                 # an optional package the builder imports
    precision: str = "fp32"            # how its users train it (ir.precision); the tiny variant: fp32


@dataclass(frozen=True)
class ModelInfo:
    """What `zoo.info(name)` reports for a name (a tiny name reports its tiny variant)."""

    name: str
    batch_size: int
    source: str
    published: Published | None
    notes: str
    tiny: bool
    requires: str
    precision: str = "fp32"
