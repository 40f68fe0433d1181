"""Ops that pick, join or rearrange elements by position: cat, stack, slices, padding,
triangles, repeats, flips; and gathers by a data value, written as one-hot sums.

Joins are nested `where`s over the joined index (`where(i < A, a[i], b[i - A])`): the analysis
narrows i in each branch, so a worker whose rows all come from `a` reads nothing of `b`.
"""

from __future__ import annotations

from stratagem.errors import TDLError
from stratagem.tdl.expr import Compute, Sum, where
from stratagem.tdl.library.common import axes, axis, names, numel, with_index
from stratagem.tdl.trace import op


def _join_axis(name, xs, dim, new_dim: bool):
    if not xs:
        raise TDLError(f"op {name!r} needs at least one tensor")
    rank = xs[0].ndim + (1 if new_dim else 0)
    a = axis(dim, rank, name)
    for t in xs[1:]:
        rest = [s for d, s in enumerate(t.shape) if new_dim or d != a]
        first = [s for d, s in enumerate(xs[0].shape) if new_dim or d != a]
        if t.ndim != xs[0].ndim or rest != first:
            raise TDLError(f"op {name!r}: shapes do not fit along dim {dim}",
                           got=", ".join(str(list(t.shape)) for t in xs))
    return a


def _cat_shape(*xs, dim=0):
    a = _join_axis("cat", xs, dim, False)
    return with_index(xs[0].shape, a, sum(t.shape[a] for t in xs))


@op(saves="nothing", shape=_cat_shape, example=(([4, 2], [4, 3], [4, 1]), {"dim": 1}))
def cat(*xs, dim=0):
    """Concatenate along dim: where(i < A, a[i], where(i < A + B, b[i - A], ...))."""
    a = _join_axis("cat", xs, dim, False)

    def body(*idx):
        i = idx[a]
        offsets = [0]
        for t in xs:
            offsets.append(offsets[-1] + t.shape[a])
        value = xs[-1][with_index(idx, a, i - offsets[-2])]
        for t, start, stop in reversed(list(zip(xs[:-1], offsets, offsets[1:]))):
            value = where(i < stop, t[with_index(idx, a, i - start)], value)
        return value

    return Compute(names("d", range(xs[0].ndim)), body)


def _stack_shape(*xs, dim=0):
    a = _join_axis("stack", xs, dim, True)
    return (*xs[0].shape[:a], len(xs), *xs[0].shape[a:])


@op(saves="nothing", shape=_stack_shape, example=(([4, 3], [4, 3]), {"dim": 0}))
def stack(*xs, dim=0):
    """Join along a new dim: out[.., s, ..] = xs[s][..]."""
    a = _join_axis("stack", xs, dim, True)

    def body(*idx):
        s, rest = idx[a], idx[:a] + idx[a + 1:]
        value = xs[-1][rest]
        for k in range(len(xs) - 2, -1, -1):
            value = where(s == k, xs[k][rest], value)
        return value

    return Compute(names("d", range(xs[0].ndim + 1)), body)


def slice_range(size: int, start, end, step) -> range:
    if step is None:
        step = 1
    if step < 1:
        raise TDLError("op 'slice': step must be positive", got=repr(step))
    return range(size)[slice(start, end, step)]


def _slice_shape(x, *, dim=0, start=None, end=None, step=1):
    a = axis(dim, x.ndim, "slice")
    return with_index(x.shape, a, len(slice_range(x.shape[a], start, end, step)))


@op(view="plain", name="slice", shape=_slice_shape, example=(([4, 8],), {"dim": 1, "start": 2, "end": 7}))
def slice_(x, *, dim=0, start=None, end=None, step=1):
    """out[.., i, ..] = x[.., start + step * i, ..] (Python slice bounds; also split pieces)."""
    a = axis(dim, x.ndim, "slice")
    picked = slice_range(x.shape[a], start, end, step)
    return Compute(names("d", range(x.ndim)),
                   lambda *idx: x[with_index(idx, a, picked.start + picked.step * idx[a])])


@op(view="plain", shape=lambda x, *, dim, start, length: with_index(x.shape, axis(dim, x.ndim, "narrow"), length),
    example=(([4, 8],), {"dim": 1, "start": 2, "length": 3}))
def narrow(x, *, dim, start, length):
    """out[.., i, ..] = x[.., start + i, ..] for i < length."""
    a = axis(dim, x.ndim, "narrow")
    start = start % x.shape[a] if start < 0 else start
    return Compute(names("d", range(x.ndim)), lambda *idx: x[with_index(idx, a, start + idx[a])])


@op(view="plain", example=(([4, 5, 6],), {"dim": 1, "index": -1}))
def select(x, *, dim, index):
    """x with dim fixed at index (the dim is dropped)."""
    a = axis(dim, x.ndim, "select")
    if not -x.shape[a] <= index < x.shape[a]:
        raise TDLError("op 'select': index out of range", expected=f"[-{x.shape[a]}, {x.shape[a]})",
                       got=repr(index))
    fixed = index % x.shape[a]
    kept = [d for d in range(x.ndim) if d != a]
    return Compute(names("d", kept), lambda *idx: x[(*idx[:a], fixed, *idx[a:])])


def _pad_pairs(x, pad):
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise TDLError("op 'pad': pad must list (left, right) pairs from the last dim backward",
                       got=repr(pad))
    pairs = [(0, 0)] * x.ndim
    for k in range(len(pad) // 2):
        pairs[x.ndim - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    return pairs


@op(saves="nothing",
    shape=lambda x, *, pad, value=0.0: tuple(s + lo + hi for s, (lo, hi) in zip(x.shape, _pad_pairs(x, pad))),
    example=(([4, 6],), {"pad": (1, 2)}))
def pad(x, *, pad, value=0.0):  # noqa: A002 - ATen's argument name (constant_pad_nd)
    """Constant padding; pairs (left, right) from the last dim backward; negative pads crop."""
    pairs = _pad_pairs(x, pad)
    source = x.padded(value)
    return Compute(names("d", range(x.ndim)),
                   lambda *idx: source[tuple(i - lo for i, (lo, _) in zip(idx, pairs))])


def _triangle(name, x, keep):
    if x.ndim < 2:
        raise TDLError(f"op {name!r} needs rank >= 2", got=str(list(x.shape)))
    return Compute(names("d", range(x.ndim)),
                   lambda *idx: where(keep(idx[-2], idx[-1]), x[idx], 0.0))


@op(saves="nothing", shape=lambda x, *, diagonal=0: x.shape, example=(([5, 6],), {"diagonal": 1}))
def triu(x, *, diagonal=0):
    """x where j - i >= diagonal over the last two dims, else 0."""
    return _triangle("triu", x, lambda i, j: j - i >= diagonal)


@op(saves="nothing", shape=lambda x, *, diagonal=0: x.shape, example=(([5, 6],), {"diagonal": 0}))
def tril(x, *, diagonal=0):
    """x where j - i <= diagonal over the last two dims, else 0 (a causal mask)."""
    return _triangle("tril", x, lambda i, j: j - i <= diagonal)


@op(saves="nothing", shape=lambda x, *, dims: x.shape, example=(([5, 6],), {"dims": (1,)}))
def flip(x, *, dims):
    """Reverse the listed dims: out[i] = x[n - 1 - i]."""
    flipped = axes(dims, x.ndim, "flip")
    return Compute(names("d", range(x.ndim)), lambda *idx: x[tuple(
        x.shape[d] - 1 - i if d in flipped else i for d, i in enumerate(idx))])


@op(saves="nothing", shape=lambda x, *, shifts, dims: x.shape, example=(([5, 6],), {"shifts": (2,), "dims": (1,)}))
def roll(x, *, shifts, dims):
    """out[i] = x[(i - shift) % n] along each listed dim."""
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims) or not dims:
        raise TDLError("op 'roll' needs one shift per dim (dims=None is not described)",
                       got=f"shifts={shifts}, dims={dims}")
    by = {axis(d, x.ndim, "roll"): s for d, s in zip(dims, shifts)}
    return Compute(names("d", range(x.ndim)), lambda *idx: x[tuple(
        (i - by[d]) % x.shape[d] if d in by else i for d, i in enumerate(idx))])


def _repeat_shape(x, *, repeats):
    repeats = tuple(repeats)
    if len(repeats) < x.ndim:
        raise TDLError("op 'repeat' needs a count per dim", got=f"{repeats} for {list(x.shape)}")
    shape = (1,) * (len(repeats) - x.ndim) + tuple(x.shape)
    return tuple(s * r for s, r in zip(shape, repeats))


@op(saves="nothing", shape=_repeat_shape, example=(([2, 3],), {"repeats": (2, 1, 2)}))
def repeat(x, *, repeats):
    """Tile x: out[i] = x[i % n] per trailing dim (extra leading dims are new)."""
    out_rank = len(repeats)
    return Compute(names("d", range(out_rank)), lambda *idx: x[tuple(
        i % n for i, n in zip(idx[out_rank - x.ndim:], x.shape))])


def _repeat_interleave_shape(x, *, repeats, dim=None):
    if dim is None:
        return (numel(x.shape) * repeats,)
    a = axis(dim, x.ndim, "repeat_interleave")
    return with_index(x.shape, a, x.shape[a] * repeats)


@op(saves="nothing", shape=_repeat_interleave_shape, example=(([2, 3, 4],), {"repeats": 2, "dim": 1}))
def repeat_interleave(x, *, repeats, dim=None):
    """Each element repeated `repeats` times along dim: out[i] = x[i // repeats] (dim=None:
    over the flattened input). LLaMA's GQA key/value expansion."""
    if not isinstance(repeats, int) or repeats < 1:
        raise TDLError("op 'repeat_interleave' needs a positive int repeats",
                       got=repr(repeats), hint="Per-element repeat counts give a data-dependent shape")
    if dim is None:
        strides = [numel(x.shape[d + 1:]) for d in range(x.ndim)]
        return Compute(["d0"], lambda i: x[tuple((i // repeats // s) % n for s, n in zip(strides, x.shape))])
    a = axis(dim, x.ndim, "repeat_interleave")
    return Compute(names("d", range(x.ndim)), lambda *idx: x[with_index(idx, a, idx[a] // repeats)])


def _gather_flops(dims, input_shapes, **_):
    return float(numel([n for name, n in dims.items() if name != "v"]))


@op(saves="nothing", flops=_gather_flops, shape=lambda x, index, *, dim: with_index(
        x.shape, axis(dim, x.ndim, "index_select"), index.shape[0] if index.ndim else 1),
    example=(([6, 5], [4]), {"dim": 0}))
def index_select(x, index, *, dim):
    """out[.., i, ..] = x[.., index[i], ..], as Sum(v: where(index[i] == v, x[.., v, ..], 0))."""
    a = axis(dim, x.ndim, "index_select")
    if index.ndim > 1:
        raise TDLError("op 'index_select' needs a 1-D index", got=str(list(index.shape)))

    def body(*idx):
        at = idx[a] if index.ndim else 0
        return Sum(lambda v: where(index[(at,) if index.ndim else ()] == v, x[with_index(idx, a, v)], 0.0))

    return Compute(names("d", range(x.ndim)), body)


@op(flops=_gather_flops, shape=lambda x, index, *, dim: index.shape, example=(([4, 6], [4, 3]), {"dim": 1}))
def gather(x, index, *, dim):
    """out[idx] = x[idx with index[idx] at dim], as a one-hot Sum over x's dim."""
    a = axis(dim, x.ndim, "gather")
    if index.ndim != x.ndim:
        raise TDLError("op 'gather': index must have x's rank",
                       got=f"{list(index.shape)} for {list(x.shape)}")

    def body(*idx):
        return Sum(lambda v: where(index[idx] == v, x[with_index(idx, a, v)], 0.0))

    return Compute(names("d", range(x.ndim)), body)
