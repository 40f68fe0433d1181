"""TDL -> torch: the PyTorch implementation of every library op.

TORCH_OPS[kind](inputs, attrs, out_shape) runs the op on tensors given in the TDL op's input order
with the op's attributes (defaults filled in), producing a tensor of shape `out_shape` (several
outputs: a tuple). Ops whose attributes carry shapes (reshape, expand) take them from `out_shape`,
so the same call runs on local shards (profiling, the runtime) and whole tensors (the reference
interpreter over the IR, the ground-truth tests).

An absent optional input is either missing from the end of `inputs` or None (a worker of a split
reduction that the analysis gives no bias: it computes the partial product only). Comparisons give
bool tensors, as torch does. The implementations live in `stratagem.frontend.torch_impl`, one
module per library topic; `opaque` has none (it has no semantics to run).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from stratagem.frontend.torch_impl import conv, linalg, nn, norm, pointwise, reduce, shape

TorchImpl = Callable[[list[Any], Mapping[str, Any], tuple[int, ...]], Any]


def _merge(*tables: Mapping[str, TorchImpl]) -> dict[str, TorchImpl]:
    merged: dict[str, TorchImpl] = {}
    for table in tables:
        twice = sorted(set(merged) & set(table))
        if twice:
            raise RuntimeError(f"torch implementations given twice: {twice}")
        merged.update(table)
    return dict(sorted(merged.items()))


TORCH_OPS: Mapping[str, TorchImpl] = MappingProxyType(_merge(
    pointwise.IMPLS, linalg.IMPLS, conv.IMPLS, norm.IMPLS, reduce.IMPLS, nn.IMPLS, shape.IMPLS))
