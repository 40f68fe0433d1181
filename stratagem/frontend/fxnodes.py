"""Small facts about exported FX nodes and their values."""

from __future__ import annotations

from typing import Any

import torch
from torch import fx


def module_path(node: fx.Node) -> str:
    """The path of the innermost nn.Module the node ran in ('' for the root)."""
    stack = node.meta.get("nn_module_stack") or {}
    path = list(stack.values())[-1][0] if stack else ""
    return path if isinstance(path, str) else ""


def tensor_leaves(val: Any) -> list[torch.Tensor]:
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (list, tuple)):
        return [t for item in val for t in tensor_leaves(item)]
    return []


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
