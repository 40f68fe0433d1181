"""Hugging Face models built from configs in code (never downloaded; HF_HUB_OFFLINE=1), wrapped so
forward(input_ids, labels) returns the model's own training loss. Needs `pip install transformers`
(the `hf` extra); the import happens only when such a model is built.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor

from stratagem.errors import StratagemError


class LossOf(nn.Module):
    """Wraps a transformers model: forward(input_ids, labels) -> outputs.loss (no KV cache).

    On tensors without data (meta, fake) the model runs as if being compiled: transformers 5 calls
    `.item()` otherwise. torch.export needs no help (it already reports compiling), but an eager
    run on meta does: FLOP counting, memory tracking, shape checks."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        shapes_only = input_ids.device.type == "meta" or isinstance(input_ids, FakeTensor)
        with compiling() if shapes_only else contextlib.nullcontext():
            return self.model(input_ids=input_ids, labels=labels, use_cache=False).loss


@contextlib.contextmanager
def compiling() -> Iterator[None]:
    """`torch.compiler.is_compiling()` reports True inside (transformers then skips data checks)."""
    original = torch.compiler.is_compiling
    torch.compiler.is_compiling = lambda: True
    try:
        yield
    finally:
        torch.compiler.is_compiling = original


def build(model_class: str, config_class: str, config: Mapping[str, Any]) -> nn.Module:
    """`transformers.<model_class>(transformers.<config_class>(**config))`, wrapped in LossOf."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        transformers = importlib.import_module("transformers")
    except ModuleNotFoundError:
        raise StratagemError("Hugging Face models need the transformers package",
                             expected="transformers installed", got="no module named 'transformers'",
                             hint="pip install 'stratagem[hf]' (or pip install transformers)") from None
    cfg = getattr(transformers, config_class)(**config)
    return LossOf(getattr(transformers, model_class)(cfg))
