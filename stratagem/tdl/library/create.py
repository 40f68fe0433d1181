"""Tensors made from attributes alone (zeros, ones, full, arange), or shaped like an input whose
values are not read (zeros_like, ...): every dim is an attribute dim, split with no input."""

from __future__ import annotations

import math

from stratagem.errors import TDLError
from stratagem.tdl.expr import Compute, Const, to_value
from stratagem.tdl.library.common import names
from stratagem.tdl.trace import op


def _filled(shape, value) -> Compute:
    return Compute(names("d", range(len(shape))), lambda *idx: Const(float(value)))


def _size(size):
    return tuple(int(s) for s in size)


@op(shape=lambda *, size: _size(size), example=((), {"size": (4, 6)}))
def zeros(*, size):
    """All zeros."""
    return _filled(_size(size), 0.0)


@op(shape=lambda *, size: _size(size), example=((), {"size": (4, 6)}))
def ones(*, size):
    """All ones."""
    return _filled(_size(size), 1.0)


@op(shape=lambda *, size, fill_value: _size(size), example=((), {"size": (4, 6), "fill_value": 2.5}))
def full(*, size, fill_value):
    """All fill_value (a rank-0 size is a scalar tensor)."""
    return _filled(_size(size), fill_value)


def arange_length(start, end, step) -> int:
    if step == 0:
        raise TDLError("op 'arange': step must be nonzero")
    return max(0, math.ceil((end - start) / step))


@op(shape=lambda *, end, start=0, step=1: (arange_length(start, end, step),),
    example=((), {"start": 2, "end": 9}))
def arange(*, end, start=0, step=1):
    """start + step * i for i < ceil((end - start) / step)."""
    return Compute(["d0"], lambda i: start + step * to_value(i))


@op(shape=lambda x: x.shape, example=([4, 6],))
def zeros_like(x):
    """Zeros shaped like x (x's values are not read)."""
    return _filled(x.shape, 0.0)


@op(shape=lambda x: x.shape, example=([4, 6],))
def ones_like(x):
    """Ones shaped like x (x's values are not read)."""
    return _filled(x.shape, 1.0)


@op(shape=lambda x, *, fill_value: x.shape, example=(([4, 6],), {"fill_value": -1.0}))
def full_like(x, *, fill_value):
    """fill_value shaped like x (x's values are not read)."""
    return _filled(x.shape, fill_value)
