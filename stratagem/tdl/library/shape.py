"""Ops that move elements without computing: reshapes, broadcasts, transposes, copies.

A reshape is written as row-major index arithmetic within groups of dims that hold the same
elements (`reshape_groups`): output indices -> position L in the group -> input index
(L // stride) % size. A dim that survives whole is its own group and reads the output index
as it is (GPT-2's [B, T, C] -> [B, T, H, C/H]), so reshapes split along every such dim; merged
or split dims keep the //, % and the analysis finds which splits stay contiguous.
"""

from __future__ import annotations

from stratagem.errors import TDLError
from stratagem.tdl.expr import Compute, trunc
from stratagem.tdl.library.common import axes, axis, broadcast_index, names, numel
from stratagem.tdl.trace import op


def resolve_shape(name: str, numel_in: int, shape) -> tuple[int, ...]:
    """A target shape with at most one -1 filled in so that the element count is kept."""
    shape = tuple(int(s) for s in shape)
    unknown = [i for i, s in enumerate(shape) if s == -1]
    known = numel([s for s in shape if s != -1])
    if len(unknown) > 1 or any(s < -1 for s in shape):
        raise TDLError(f"op {name!r}: bad target shape", expected="sizes >= 0 and at most one -1",
                       got=str(list(shape)))
    if unknown:
        if known == 0 or numel_in % known:
            raise TDLError(f"op {name!r}: cannot infer -1 in {list(shape)}", got=f"{numel_in} elements")
        shape = tuple(numel_in // known if s == -1 else s for s in shape)
    if numel(shape) != numel_in:
        raise TDLError(f"op {name!r}: shape {list(shape)} does not keep the element count",
                       expected=str(numel_in), got=str(numel(shape)))
    return shape


def _strides(shape) -> list[int]:
    return [numel(shape[d + 1:]) for d in range(len(shape))]


def reshape_groups(in_shape, out_shape) -> list[tuple[list[int], list[int]]]:
    """The dims of a reshape matched into groups of equal element count, in order: each group's
    input dims hold the same elements as its output dims ([B, T, V] -> [B*T, V]: ([0, 1], [0]) and
    ([2], [1])). Size-1 dims join no group; a reshape that mixes dims ([6, 4] -> [4, 6]) is one group."""
    ins = [d for d, n in enumerate(in_shape) if n != 1]
    outs = [d for d, n in enumerate(out_shape) if n != 1]
    groups, i, o = [], 0, 0
    while i < len(ins) and o < len(outs):
        gi, go = [ins[i]], [outs[o]]
        n_in, n_out = in_shape[ins[i]], out_shape[outs[o]]
        i, o = i + 1, o + 1
        while n_in != n_out:
            if n_in < n_out:
                gi.append(ins[i])
                n_in, i = n_in * in_shape[ins[i]], i + 1
            else:
                go.append(outs[o])
                n_out, o = n_out * out_shape[outs[o]], o + 1
        groups.append((gi, go))
    return groups


def reshaped(x, out_shape) -> Compute:
    """out[idx] = x[the same row-major position]. Per group of `reshape_groups`, the output
    indices give a position within the group, L, and each input dim reads (L // stride) % size;
    dims outside a group are size 1 and read 0. Working per group keeps the index arithmetic
    local (a merge [B, T, V] -> [B*T, V] reads x[L // T, L % T, v] with v untouched), so every dim
    that survives whole splits without enumerating the others."""
    groups = reshape_groups(x.shape, out_shape)

    def body(*idx):
        source = [0] * len(x.shape)
        for in_dims, out_dims in groups:
            out_strides = _strides([out_shape[d] for d in out_dims])
            position = sum((idx[d] * s for d, s in zip(out_dims, out_strides)), 0)
            sizes = [x.shape[d] for d in in_dims]
            for d, s, n in zip(in_dims, _strides(sizes), sizes):
                source[d] = (position // s) % n if s * n < numel(sizes) else position // s
        return x[tuple(source)]

    return Compute(names("d", range(len(out_shape))), body)


@op(view="reshape", follows=True, shape=lambda x, *, shape: resolve_shape("reshape", numel(x.shape), shape),
    example=(([4, 6],), {"shape": (4, 2, 3)}))
def reshape(x, *, shape):
    """The same elements in row-major order, in a new shape (view, reshape, _unsafe_view)."""
    return reshaped(x, resolve_shape("reshape", numel(x.shape), shape))


def _flatten_shape(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return (1,)
    s, e = axis(start_dim, x.ndim, "flatten"), axis(end_dim, x.ndim, "flatten")
    if s > e:
        raise TDLError("op 'flatten': start_dim after end_dim", got=f"{start_dim}, {end_dim}")
    return (*x.shape[:s], numel(x.shape[s:e + 1]), *x.shape[e + 1:])


@op(view="reshape", follows=True, shape=_flatten_shape, example=(([2, 3, 4, 5],), {"start_dim": 1}))
def flatten(x, *, start_dim=0, end_dim=-1):
    """Merge dims start_dim..end_dim into one."""
    return reshaped(x, _flatten_shape(x, start_dim, end_dim))


def _unflatten_shape(x, dim, sizes):
    a = axis(dim, x.ndim, "unflatten")
    inner = resolve_shape("unflatten", x.shape[a], sizes)
    return (*x.shape[:a], *inner, *x.shape[a + 1:])


@op(view="reshape", follows=True, shape=_unflatten_shape, example=(([2, 12],), {"dim": 1, "sizes": (3, -1)}))
def unflatten(x, *, dim, sizes):
    """Split dim into sizes (one may be -1)."""
    return reshaped(x, _unflatten_shape(x, dim, sizes))


def _unsqueeze_shape(x, dim):
    a = axis(dim, x.ndim + 1, "unsqueeze")
    return (*x.shape[:a], 1, *x.shape[a:])


@op(view="plain", follows=True, shape=_unsqueeze_shape, example=(([4, 6],), {"dim": 1}))
def unsqueeze(x, *, dim):
    """Insert a size-1 dim at dim."""
    return reshaped(x, _unsqueeze_shape(x, dim))


def _squeeze_shape(x, dim=None):
    dims = axes(dim, x.ndim, "squeeze") if x.ndim else ()
    return tuple(s for d, s in enumerate(x.shape) if not (d in dims and s == 1))


@op(view="plain", follows=True, shape=_squeeze_shape, example=(([4, 1, 6],), {"dim": 1}))
def squeeze(x, *, dim=None):
    """Drop size-1 dims (those listed in dim, or all)."""
    return reshaped(x, _squeeze_shape(x, dim))


def _expand_shape(x, size):
    size = tuple(int(s) for s in size)
    if len(size) < x.ndim:
        raise TDLError("op 'expand': size has fewer dims than the input",
                       got=f"{list(size)} for {list(x.shape)}")
    lead = len(size) - x.ndim
    out = tuple(x.shape[d - lead] if s == -1 and d >= lead else s for d, s in enumerate(size))
    for d in range(x.ndim):
        if x.shape[d] not in (1, out[lead + d]):
            raise TDLError("op 'expand' can only stretch size-1 dims", got=f"{list(x.shape)} to {list(size)}")
    return out


@op(view="strided", follows=True, shape=_expand_shape, example=(([4, 1],), {"size": (3, 4, 6)}))
def expand(x, *, size):
    """Broadcast x to size (-1 keeps a dim); size-1 dims are read at index 0."""
    out = _expand_shape(x, size)
    return Compute(names("d", range(len(out))), lambda *idx: x[broadcast_index(x.shape, idx, out)])


def _permuted(x, order):
    """out dim i is x dim order[i]."""
    def body(*idx):
        source = [None] * x.ndim
        for i, d in enumerate(order):
            source[d] = idx[i]
        return x[tuple(source)]
    return Compute(names("d", range(x.ndim)), body)


@op(view="strided", follows=True, example=(([4, 5, 6],), {"dim0": 1, "dim1": 2}))
def transpose(x, *, dim0, dim1):
    """Swap two dims."""
    order = list(range(x.ndim))
    a, b = axis(dim0, x.ndim, "transpose"), axis(dim1, x.ndim, "transpose")
    order[a], order[b] = order[b], order[a]
    return _permuted(x, order)


@op(view="strided", follows=True, example=(([4, 5, 6],), {"dims": (2, 0, 1)}))
def permute(x, *, dims):
    """Reorder dims: output dim i is input dim dims[i]."""
    order = [axis(d, x.ndim, "permute") for d in dims]
    if sorted(order) != list(range(x.ndim)):
        raise TDLError("op 'permute': dims is not a permutation", got=repr(dims))
    return _permuted(x, order)


def _identity(x):
    return Compute(names("d", range(x.ndim)), lambda *idx: x[idx])


@op(view="reshape", follows=True, example=([4, 6],))
def contiguous(x):
    """The same values: its input itself when laid out row-major (a view), else a row-major copy."""
    return _identity(x)


@op(saves="nothing", follows=True, example=([4, 6],))
def clone(x):
    """The same values (a copy; also aten alias, detach)."""
    return _identity(x)


@op(follows=True, example=(([4, 6],), {"dtype": "bfloat16"}))
def to_copy(x, *, dtype=None):
    """x cast to dtype (a torch dtype name): integer types truncate, bool tests for nonzero,
    floating types keep the value (the TDL computes in reals)."""
    name = str(dtype or "").replace("torch.", "")
    if name == "bool":
        return Compute(names("d", range(x.ndim)), lambda *idx: x[idx] != 0.0)
    if "int" in name:
        return Compute(names("d", range(x.ndim)), lambda *idx: trunc(x[idx]))
    return _identity(x)


def _diagonal_length(x, offset, dim1, dim2):
    a, b = axis(dim1, x.ndim, "diagonal"), axis(dim2, x.ndim, "diagonal")
    if a == b:
        raise TDLError("op 'diagonal': dim1 and dim2 must differ", got=f"{dim1}, {dim2}")
    return a, b, min(x.shape[a] - max(-offset, 0), x.shape[b] - max(offset, 0))


def _diagonal_shape(x, *, offset=0, dim1=0, dim2=1):
    a, b, length = _diagonal_length(x, offset, dim1, dim2)
    return (*(s for d, s in enumerate(x.shape) if d not in (a, b)), length)


@op(view="strided", shape=_diagonal_shape, example=(([3, 5, 6],), {"offset": 1, "dim1": 1, "dim2": 2}))
def diagonal(x, *, offset=0, dim1=0, dim2=1):
    """out[.., k] = x[.., k + max(-offset, 0) at dim1, .., k + max(offset, 0) at dim2, ..]."""
    a, b, _ = _diagonal_length(x, offset, dim1, dim2)
    kept = [d for d in range(x.ndim) if d not in (a, b)]

    def body(*idx):
        *rest, k = idx
        source = [None] * x.ndim
        for d, i in zip(kept, rest):
            source[d] = i
        source[a], source[b] = k + max(-offset, 0), k + max(offset, 0)
        return x[tuple(source)]

    return Compute([*names("d", kept), "k"], body)


@op(view="strided", shape=lambda x, *, size, stride, storage_offset=0: tuple(size),
    example=(([4, 6],), {"size": (3, 4), "stride": (6, 1), "storage_offset": 2}))
def as_strided(x, *, size, stride, storage_offset=0):
    """out[idx] = the element at storage position storage_offset + sum(idx * stride) of x laid out
    row-major (capture converts only contiguous inputs)."""
    storage = numel(x.shape)
    last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride))
    if storage_offset < 0 or any(s < 0 for s in stride) or last >= storage:
        raise TDLError("op 'as_strided' reads outside the input's storage", expected=f"< {storage}",
                       got=f"positions up to {last}")
    in_strides = _strides(x.shape)

    def body(*idx):
        position = sum((i * s for i, s, n in zip(idx, stride, size) if n > 1), storage_offset)
        return x[tuple(0 if n == 1 else (position // s) % n for s, n in zip(in_strides, x.shape))]

    return Compute(names("d", range(len(size))), body)
