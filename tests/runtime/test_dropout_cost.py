"""What the runtime's counter-based dropout moves, against what the cost model charges for it
(tdl.rng.MASK_BYTES_PER_DRAW per random number, on top of the description's input and output)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from stratagem.runtime.localops import ADAPTERS
from stratagem.tdl.rng import MASK_BYTES_PER_DRAW


class BytesMoved(TorchDispatchMode):
    """Bytes each ATen kernel reads and writes: its tensor arguments and its results."""

    def __init__(self):
        super().__init__()
        self.num_bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func._schema.is_mutable and _aliases(func):
            return out                      # a view: no kernel runs
        self.num_bytes += sum(t.numel() * t.element_size() for t in tree_flatten((args, kwargs, out))[0]
                              if isinstance(t, torch.Tensor))
        return out


def _aliases(func) -> bool:
    return any(r.alias_info is not None for r in func._schema.returns)


@pytest.mark.parametrize("shape", [(1 << 16,), (64, 1024), (8, 32, 256), (4, 4, 64, 64)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_mask_moves_what_the_cost_model_charges(shape, dtype):
    x = torch.randn(shape).to(dtype)
    view = SimpleNamespace(out_box=tuple((0, n) for n in shape))
    with BytesMoved() as moved:
        ADAPTERS["dropout_positions"]([x], {"p": 0.1, "train": True, "seed": 3}, view,
                                      SimpleNamespace(output_shape=shape))
    per_element = moved.num_bytes / x.numel()
    described = 2 * x.element_size()       # the description: x read, the output written
    # beyond the charge: the scaled x the runtime writes and reads again (2 itemsizes), and the
    # partial sums of the positions over the trailing dims (each int64 written, then read: 16 bytes)
    partials = sum(math.prod(shape[d:]) for d in range(1, len(shape) - 1)) / x.numel()
    charged = MASK_BYTES_PER_DRAW + described
    assert charged <= per_element <= charged + 2 * x.element_size() + 16 * partials + 1
