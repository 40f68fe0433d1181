"""The dtype a graph's tensors are computed in, when a run evaluates its floating-point math in
another precision than the one captured (float64, to check that two evaluations are the same math).

    torch_dtype(recorded, floating)   the recorded dtype, or `floating` for a floating-point one
    cast_floating(tree, floating)     every floating-point tensor of a nested structure in `floating`

Integer and boolean tensors (indices, masks, labels) keep their dtype. `floating=None` is the
captured precision, unchanged. The interpreter, the runtime and the recorded constants all ask
these, so a float64 evaluation is float64 everywhere.
"""

from __future__ import annotations

from typing import Any

import torch


def torch_dtype(recorded: str, floating: torch.dtype | None = None) -> torch.dtype:
    dtype = getattr(torch, recorded)
    return floating if floating is not None and dtype.is_floating_point else dtype


def cast_floating(tree: Any, floating: torch.dtype | None) -> Any:
    if floating is None:
        return tree
    return torch.utils._pytree.tree_map(
        lambda x: x.to(floating) if isinstance(x, torch.Tensor) and x.is_floating_point() else x, tree)


def recorded_constant(record: dict[str, Any], floating: torch.dtype | None = None) -> torch.Tensor:
    """A constant lifted at capture (graph.meta["constants"][name]) as a tensor."""
    dtype = torch_dtype(record["dtype"], floating)
    return torch.tensor(record["values"], dtype=dtype).reshape(record["shape"])
