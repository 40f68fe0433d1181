"""Writes into a copy of x: scatter_add as a one-hot sum over the scattered positions, and
slice_scatter / select_scatter as `where`s over the output index."""

from __future__ import annotations

from stratagem.errors import TDLError
from stratagem.tdl.expr import Compute, Sum, where
from stratagem.tdl.library.common import axis, names, numel, with_index
from stratagem.tdl.library.index import slice_range
from stratagem.tdl.trace import op


def _scatter_add_flops(dims, input_shapes, *, dim):
    """A copy of x and one add per scattered element (the one-hot sum would count every pair)."""
    a = axis(dim, len(input_shapes[0]), "scatter_add")
    out_size = numel([n for name, n in dims.items() if name != "j"])
    rows = out_size // dims[f"d{a}"]
    return float(out_size + rows * dims.get("j", input_shapes[1][a]))   # j: index extent along `dim`


@op(saves="nothing", shape=lambda x, index, src, *, dim: x.shape, flops=_scatter_add_flops,
    example=(([4, 6], [4, 3], [4, 3]), {"dim": 1}))
def scatter_add(x, index, src, *, dim):
    """out = x; out[.., index[.., j, ..], ..] += src[.., j, ..], as
    x[idx] + Sum(j: where(index[idx with j] == idx[dim], src[idx with j], 0))."""
    a = axis(dim, x.ndim, "scatter_add")
    if index.ndim != x.ndim or src.ndim != x.ndim:
        raise TDLError("op 'scatter_add': x, index and src need the same rank",
                       got=f"{list(x.shape)}, {list(index.shape)}, {list(src.shape)}")
    if any(i > s for i, s in zip(index.shape, src.shape)) or any(
            i > n for d, (i, n) in enumerate(zip(index.shape, x.shape)) if d != a):
        raise TDLError("op 'scatter_add': index is larger than src or x", got=str(list(index.shape)))

    def body(*idx):
        def term(j):
            at = with_index(idx, a, j)
            return where(index[at] == idx[a], src[at], 0.0)
        added = Sum(lambda j: term(j), j=index.shape[a])
        for d, (i, n) in enumerate(zip(idx, index.shape)):
            if d != a and n < x.shape[d]:
                added = where(i < n, added, 0.0)
        return x[idx] + added

    return Compute(names("d", range(x.ndim)), body)


@op(saves="nothing", shape=lambda x, src, **_: x.shape, example=(([4, 8], [4, 3]), {"dim": 1, "start": 2, "end": 5}))
def slice_scatter(x, src, *, dim=0, start=None, end=None, step=1):
    """x with x[.., start:end, ..] replaced by src. A step > 1 is not described: its positions
    alternate between x and src, and a box of src per worker would over-fetch."""
    a = axis(dim, x.ndim, "slice_scatter")
    picked = slice_range(x.shape[a], start, end, step)
    if picked.step != 1:
        raise TDLError("op 'slice_scatter': step > 1 is not described", expected="step=1", got=repr(step))
    if src.shape[a] != len(picked):
        raise TDLError("op 'slice_scatter': src does not fit the slice", expected=str(len(picked)),
                       got=str(src.shape[a]))

    def body(*idx):
        i = idx[a]
        inside = src[with_index(idx, a, i - picked.start)]
        return where(i < picked.start, x[idx], where(i < picked.stop, inside, x[idx]))

    return Compute(names("d", range(x.ndim)), body)


@op(saves="nothing", shape=lambda x, src, **_: x.shape, example=(([4, 5, 6], [4, 6]), {"dim": 1, "index": 2}))
def select_scatter(x, src, *, dim, index):
    """x with x[.., index, ..] (along dim) replaced by src."""
    a = axis(dim, x.ndim, "select_scatter")
    fixed = index % x.shape[a]

    def body(*idx):
        rest = idx[:a] + idx[a + 1:]
        return where(idx[a] == fixed, src[rest], x[idx])

    return Compute(names("d", range(x.ndim)), body)
