"""A sequence whose items are made when read, so that a cluster of any size holds no object per
device, node or link: item i of `LazySequence(length, make, what)` is `make(i)`, for
0 <= i < length (negative indices count from the end, slices give tuples)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any


class LazySequence(Sequence):
    def __init__(self, length: int, make: Callable[[int], Any], what: str):
        self._length, self._make, self._what = length, make, what

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(self._length)))
        i = i + self._length if i < 0 else i
        if not 0 <= i < self._length:
            raise IndexError(f"{self._what} {i} of {self._length}")
        return self._make(i)

    def __iter__(self) -> Iterator[Any]:
        return (self._make(i) for i in range(self._length))
