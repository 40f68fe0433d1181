"""Helpers for rank-generic descriptions: dim arguments, index names, NumPy broadcasting.

Descriptions whose rank depends on the input shapes are written with `Compute(names, fn)`; the
names below keep them readable in `stratagem ops`: output index `d2` walks the input's dim 2,
reduction index `r2` is summed over it, `k2` is a kept size-1 dim (keepdim=True).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from stratagem.errors import TDLError
from stratagem.tdl.expr import Compute, Value

NEG_INF = float("-inf")
POS_INF = float("inf")


def axis(dim: int, rank: int, op_name: str) -> int:
    """A dim argument (negative counts from the end) as an index in [0, rank)."""
    if not isinstance(dim, int) or isinstance(dim, bool) or not -max(rank, 1) <= dim < max(rank, 1):
        raise TDLError(f"op {op_name!r}: dim {dim!r} is out of range", expected=f"an int in "
                       f"[{-max(rank, 1)}, {max(rank, 1)}) for a rank-{rank} input", got=repr(dim))
    return dim % max(rank, 1)


def axes(dims: int | Sequence[int] | None, rank: int, op_name: str) -> tuple[int, ...]:
    """Dim arguments as sorted unique indices; None (or an empty list) means every dim."""
    if dims is None or (isinstance(dims, (tuple, list)) and len(dims) == 0):
        return tuple(range(rank))
    if isinstance(dims, int):
        dims = (dims,)
    return tuple(sorted({axis(d, rank, op_name) for d in dims}))


def names(prefix: str, dims: Sequence[int]) -> list[str]:
    return [f"{prefix}{d}" for d in dims]


def broadcast_shape(op_name: str, *shapes: Sequence[int]) -> tuple[int, ...]:
    """NumPy broadcasting of the given shapes (trailing dims aligned, size 1 stretches)."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(rank):
        sizes = {s[len(s) - rank + d] for s in shapes if len(s) - rank + d >= 0}
        big = sizes - {1}
        if len(big) > 1:
            raise TDLError(f"op {op_name!r}: shapes do not broadcast",
                           expected="equal sizes or 1 in every trailing-aligned dim",
                           got=" and ".join(str(list(s)) for s in shapes))
        out.append(big.pop() if big else 1)
    return tuple(out)


def broadcast_index(shape: Sequence[int], idx: Sequence[Any], out_shape: Sequence[int]
                    ) -> tuple[Any, ...]:
    """Index into a tensor of `shape` broadcast to `out_shape` at output index `idx`: trailing
    dims aligned, index 0 where the tensor has size 1 and the output has more."""
    rank = len(out_shape)
    entries = []
    for d, size in enumerate(shape):
        od = rank - len(shape) + d
        entries.append(0 if size == 1 and out_shape[od] != 1 else idx[od])
    return tuple(entries)


def broadcast_read(x: Any, idx: Sequence[Any], out_shape: Sequence[int]) -> Value:
    """x read at output index `idx` of the broadcast shape `out_shape`."""
    return x[broadcast_index(x.shape, idx, out_shape)]


def pointwise(op_name: str, tensors: Sequence[Any], fn: Callable[..., Any]) -> Compute:
    """Output = fn(elements of each tensor at the broadcast output index)."""
    shape = broadcast_shape(op_name, *(t.shape for t in tensors))

    def body(*idx: Any) -> Any:
        return fn(*(broadcast_read(t, idx, shape) for t in tensors))

    return Compute(names("d", range(len(shape))), body)


def with_index(idx: Sequence[Any], dim: int, value: Any) -> tuple[Any, ...]:
    """idx with entry `dim` replaced by `value`."""
    out = list(idx)
    out[dim] = value
    return tuple(out)


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def ints(value: int | Sequence[int], count: int, op_name: str, what: str) -> tuple[int, ...]:
    """An int or a sequence of `count` ints (kernel_size=3 or (3, 3))."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * count
    values = tuple(value)
    if len(values) == 1:
        return values * count
    if len(values) != count or not all(isinstance(v, int) for v in values):
        raise TDLError(f"op {op_name!r}: {what} must be an int or {count} ints", got=repr(value))
    return values
