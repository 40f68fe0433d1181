"""TDL -> torch: the PyTorch implementation of every library op.

TORCH_OPS[kind](inputs, attrs, out_shape) runs the op on tensors given in the TDL op's input order
with the op's attributes (defaults filled in), producing a tensor of shape `out_shape` (several
outputs: a tuple). Ops whose attributes carry shapes (reshape, expand) take them from `out_shape`,
so the same call runs on local shards (profiling, the runtime) and whole tensors (the reference
interpreter over the IR, the ground-truth tests).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

TorchImpl = Callable[[list[Any], Mapping[str, Any], tuple[int, ...]], Any]

TORCH_OPS: Mapping[str, TorchImpl] = MappingProxyType({})
