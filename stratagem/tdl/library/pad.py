"""Reflection and replication padding: each padded dim reads x through a piecewise-affine map,
written as nested `where`s over the output index (left edge, inside, right edge), so a worker
whose rows are all inside reads no more than its own rows."""

from __future__ import annotations

from collections.abc import Callable

from stratagem.errors import TDLError
from stratagem.tdl.expr import Compute, where
from stratagem.tdl.library.common import names
from stratagem.tdl.library.index import _pad_pairs
from stratagem.tdl.trace import op


def _reflect(i, left, n):
    """(left edge source, inside source, right edge source) of output index i."""
    return left - i, i - left, 2 * (n - 1) - (i - left)


def _replicate(i, left, n):
    return 0, i - left, n - 1


def _padded_read(x, pairs, source: Callable, idx):
    def read(d, chosen):
        if d == x.ndim:
            return x[tuple(chosen)]
        left, right = pairs[d]
        if (left, right) == (0, 0):
            return read(d + 1, chosen + [idx[d]])
        i, n = idx[d], x.shape[d]
        before, inside, after = source(i, left, n)
        return where(i < left, read(d + 1, chosen + [before]),
                     where(i < left + n, read(d + 1, chosen + [inside]), read(d + 1, chosen + [after])))
    return read(0, [])


def _pads(name, x, pad, largest):
    pairs = _pad_pairs(x, pad)
    for (left, right), n in zip(pairs, x.shape):
        if left < 0 or right < 0 or max(left, right) > largest(n):
            raise TDLError(f"op {name!r}: padding {pad} does not fit the input {list(x.shape)}",
                           expected="non-negative pads, at most size - 1 for reflection")
    return pairs


def _shape(x, *, pad):
    return tuple(s + lo + hi for s, (lo, hi) in zip(x.shape, _pad_pairs(x, pad)))


@op(shape=_shape, example=(([2, 3, 6],), {"pad": (2, 1)}))
def reflection_pad(x, *, pad):
    """Pad by mirroring without repeating the edge: out[left - 1] = x[1] (pairs from the last dim)."""
    pairs = _pads("reflection_pad", x, pad, lambda n: n - 1)
    return Compute(names("d", range(x.ndim)), lambda *idx: _padded_read(x, pairs, _reflect, idx))


@op(shape=_shape, example=(([2, 3, 6],), {"pad": (2, 1)}))
def replication_pad(x, *, pad):
    """Pad by repeating the edge element (pairs from the last dim)."""
    pairs = _pads("replication_pad", x, pad, lambda n: 10 ** 9)
    return Compute(names("d", range(x.ndim)), lambda *idx: _padded_read(x, pairs, _replicate, idx))
