"""Matrix products."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from stratagem.frontend.torch_impl.common import optional


def _linear(inputs, attrs, out_shape):
    return F.linear(inputs[0], inputs[1], optional(inputs, 2))


def _added(product, added, beta, alpha):
    """beta * added + alpha * product; a worker given no `added` (a split k) adds nothing."""
    scaled = product if alpha == 1 else alpha * product
    if added is None or beta == 0:
        return scaled
    return scaled + (added if beta == 1 else beta * added)


def _addmm(inputs, attrs, out_shape):
    return _added(torch.mm(inputs[0], inputs[1]), optional(inputs, 2), attrs["beta"], attrs["alpha"])


def _baddbmm(inputs, attrs, out_shape):
    return _added(torch.bmm(inputs[0], inputs[1]), optional(inputs, 2), attrs["beta"], attrs["alpha"])


IMPLS = {
    "mm": lambda inputs, attrs, out_shape: torch.mm(inputs[0], inputs[1]),
    "bmm": lambda inputs, attrs, out_shape: torch.bmm(inputs[0], inputs[1]),
    "matmul": lambda inputs, attrs, out_shape: torch.matmul(inputs[0], inputs[1]),
    "linear": _linear,
    "addmm": _addmm,
    "baddbmm": _baddbmm,
}
