"""Reshapes, copies, joins, slices, padding, gathers, and tensors made from attributes.

Shape-carrying ops take their shape from `out_shape`, so they run unchanged on shards.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from stratagem.tdl.library.index import slice_range

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64, "int64": torch.int64, "int32": torch.int32, "bool": torch.bool,
          "int8": torch.int8, "uint8": torch.uint8, "int16": torch.int16}


def _dtype(name):
    if name is None:
        return None
    return DTYPES[str(name).replace("torch.", "")]


def _reshape(inputs, attrs, out_shape):
    return inputs[0].reshape(out_shape)


def _slice(inputs, attrs, out_shape):
    x = inputs[0]
    dim = attrs["dim"] % x.dim()
    picked = slice_range(x.shape[dim], attrs["start"], attrs["end"], attrs["step"])
    return x[(slice(None),) * dim + (slice(picked.start, picked.stop, picked.step),)]


def _full(value):
    return lambda inputs, attrs, out_shape: torch.full(tuple(out_shape), value, dtype=torch.float32)


def _arange(inputs, attrs, out_shape):
    start, step = attrs["start"], attrs["step"]
    return start + step * torch.arange(out_shape[0], dtype=torch.float64)


def _index_select(inputs, attrs, out_shape):
    return torch.index_select(inputs[0], attrs["dim"], inputs[1].long().reshape(-1)).reshape(out_shape)


def _repeat_interleave(inputs, attrs, out_shape):
    return torch.repeat_interleave(inputs[0], attrs["repeats"], dim=attrs["dim"])


def _to_copy(inputs, attrs, out_shape):
    dtype = _dtype(attrs["dtype"])
    return inputs[0].to(dtype) if dtype is not None else inputs[0].clone()


def _as_strided(inputs, attrs, out_shape):
    """A view, as in PyTorch, of the input laid out row-major from its first element (a copy of it
    only when it is not laid out so)."""
    x = inputs[0]
    storage = x if x.is_contiguous() and x.storage_offset() == 0 else x.clone(memory_format=torch.contiguous_format)
    return torch.as_strided(storage, tuple(attrs["size"]), tuple(attrs["stride"]), attrs["storage_offset"])


def _scatter_add(inputs, attrs, out_shape):
    """A worker of a split over the scattered positions is given no x: it adds into zeros."""
    x, index, src = inputs
    base = torch.zeros(tuple(out_shape), dtype=src.dtype) if x is None else x
    return torch.scatter_add(base, attrs["dim"], index.long(), src)


IMPLS = {
    "reshape": _reshape, "flatten": _reshape, "unflatten": _reshape, "unsqueeze": _reshape,
    "squeeze": _reshape,
    "expand": lambda inputs, attrs, out_shape: inputs[0].expand(tuple(out_shape)),
    "transpose": lambda inputs, attrs, out_shape: inputs[0].transpose(attrs["dim0"], attrs["dim1"]),
    "permute": lambda inputs, attrs, out_shape: inputs[0].permute(tuple(attrs["dims"])),
    "contiguous": lambda inputs, attrs, out_shape: inputs[0].contiguous(),
    "clone": lambda inputs, attrs, out_shape: inputs[0].clone(),
    "to_copy": _to_copy,
    "cat": lambda inputs, attrs, out_shape: torch.cat([t for t in inputs if t is not None], attrs["dim"]),
    "stack": lambda inputs, attrs, out_shape: torch.stack(list(inputs), attrs["dim"]),
    "slice": _slice,
    "narrow": lambda inputs, attrs, out_shape: inputs[0].narrow(attrs["dim"], attrs["start"],
                                                                attrs["length"]),
    "select": lambda inputs, attrs, out_shape: inputs[0].select(attrs["dim"], attrs["index"]),
    "pad": lambda inputs, attrs, out_shape: F.pad(inputs[0], tuple(attrs["pad"]), value=attrs["value"]),
    "triu": lambda inputs, attrs, out_shape: torch.triu(inputs[0], attrs["diagonal"]),
    "tril": lambda inputs, attrs, out_shape: torch.tril(inputs[0], attrs["diagonal"]),
    "flip": lambda inputs, attrs, out_shape: torch.flip(inputs[0], tuple(attrs["dims"])),
    "roll": lambda inputs, attrs, out_shape: torch.roll(inputs[0], attrs["shifts"], attrs["dims"]),
    "repeat": lambda inputs, attrs, out_shape: inputs[0].repeat(tuple(attrs["repeats"])),
    "repeat_interleave": _repeat_interleave,
    "index_select": _index_select,
    "gather": lambda inputs, attrs, out_shape: torch.gather(inputs[0], attrs["dim"], inputs[1].long()),
    "reflection_pad": lambda inputs, attrs, out_shape: F.pad(inputs[0], tuple(attrs["pad"]),
                                                             mode="reflect"),
    "replication_pad": lambda inputs, attrs, out_shape: F.pad(inputs[0], tuple(attrs["pad"]),
                                                              mode="replicate"),
    "diagonal": lambda inputs, attrs, out_shape: torch.diagonal(inputs[0], attrs["offset"], attrs["dim1"],
                                                                attrs["dim2"]),
    "as_strided": _as_strided,
    "scatter_add": _scatter_add,
    "slice_scatter": lambda inputs, attrs, out_shape: torch.slice_scatter(
        inputs[0], inputs[1], attrs["dim"], attrs["start"], attrs["end"], attrs["step"]),
    "select_scatter": lambda inputs, attrs, out_shape: torch.select_scatter(
        inputs[0], inputs[1], attrs["dim"], attrs["index"]),
    "zeros": _full(0.0), "ones": _full(1.0),
    "full": lambda inputs, attrs, out_shape: torch.full(tuple(out_shape), attrs["fill_value"]),
    "arange": _arange,
    "zeros_like": _full(0.0), "ones_like": _full(1.0),
    "full_like": lambda inputs, attrs, out_shape: torch.full(tuple(out_shape), attrs["fill_value"]),
}
