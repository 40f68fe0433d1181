"""Reductions. dim=None (or empty) reduces every dim, as in the TDL library."""

from __future__ import annotations

import torch


def _dims(x, dim):
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(x.dim()))
    return (dim,) if isinstance(dim, int) else tuple(dim)


def _over(fn):
    """fn(x, dims, keepdim) for reductions that take several dims."""
    def impl(inputs, attrs, out_shape):
        x = inputs[0]
        return fn(x, _dims(x, attrs["dim"]), attrs["keepdim"]).reshape(out_shape)
    return impl


def _one_by_one(fn):
    """Reductions torch gives one dim at a time (prod, any, all)."""
    def reduce(x, dims, keepdim):
        for d in sorted(dims, reverse=True):
            x = fn(x, d, keepdim=keepdim)
        return x
    return reduce


def _var(inputs, attrs, out_shape, fn=torch.var):
    x = inputs[0]
    return fn(x, _dims(x, attrs["dim"]), correction=attrs["correction"],
              keepdim=attrs["keepdim"]).reshape(out_shape)


def _arg(fn):
    def impl(inputs, attrs, out_shape):
        x, dim = inputs[0], attrs["dim"]
        if dim is not None and not isinstance(dim, int):
            dim = dim[0] if len(dim) == 1 else None
        return fn(x, dim=dim, keepdim=attrs["keepdim"]).reshape(out_shape)
    return impl


def _max_min_dim(fn):
    def impl(inputs, attrs, out_shape):
        values, indices = fn(inputs[0], attrs["dim"], keepdim=attrs["keepdim"])
        return values, indices
    return impl


IMPLS = {
    "sum": _over(lambda x, d, k: torch.sum(x, d, keepdim=k)),
    "mean": _over(lambda x, d, k: torch.mean(x, d, keepdim=k)),
    "amax": _over(lambda x, d, k: torch.amax(x, d, keepdim=k)),
    "amin": _over(lambda x, d, k: torch.amin(x, d, keepdim=k)),
    "prod": _over(_one_by_one(torch.prod)),
    "any": _over(_one_by_one(torch.any)),
    "all": _over(_one_by_one(torch.all)),
    "logsumexp": _over(lambda x, d, k: torch.logsumexp(x, d, keepdim=k)),
    "var": _var,
    "std": lambda inputs, attrs, out_shape: _var(inputs, attrs, out_shape, torch.std),
    "argmax": _arg(torch.argmax),
    "argmin": _arg(torch.argmin),
    "max_dim": _max_min_dim(torch.max),
    "min_dim": _max_min_dim(torch.min),
    "cumsum": lambda inputs, attrs, out_shape: torch.cumsum(inputs[0], attrs["dim"]),
}
