"""Which dim of every captured tensor is the batch: export twice, the second time with one more sample.

A dim is a tensor's batch dim when it has size n in the first export and n + 1 in the second, and it
is the only dim that grew by one. Dims that grow by more (a flattened batch-times-time dim) or that
several dims share (an outer product over the batch) are not batch dims: an opaque op may be split
along a dim only when its slices line up one-to-one with the input samples.

The two graphs are matched node by node by name and target; a model whose graph depends on the
batch size gets no batch dims (every opaque op is replicated), and a warning says so.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from stratagem.frontend.export import export_program


def with_one_more_sample(inputs: Sequence[Any], sample_dims: Sequence[int | None]) -> tuple[Any, ...]:
    """The inputs with every tensor leaf's sample dim one longer (zero-filled, on the same device);
    `sample_dims` has one entry per pytree leaf (None for non-tensors)."""
    leaves, spec = torch.utils._pytree.tree_flatten(list(inputs))
    grown = [_grow(x, d) if isinstance(x, torch.Tensor) else x for x, d in zip(leaves, sample_dims, strict=True)]
    return tuple(torch.utils._pytree.tree_unflatten(grown, spec))


def _grow(x: torch.Tensor, dim: int | None) -> torch.Tensor:
    if dim is None:
        return x
    shape = list(x.shape)
    shape[dim] += 1
    return torch.zeros(shape, dtype=x.dtype, device=x.device)


def detect_batch_dims(module: torch.nn.Module, inputs: Sequence[Any], sample_dims: Sequence[int | None],
                      program: torch.export.ExportedProgram) -> Mapping[str, int | None]:
    """fx node name -> batch dim of its (tensor) value; empty when it cannot be told."""
    grown = grown_export(module, inputs, sample_dims)
    return {} if grown is None else dims_between(program, grown)


def grown_export(module: torch.nn.Module, inputs: Sequence[Any],
                 sample_dims: Sequence[int | None]) -> torch.export.ExportedProgram | None:
    """The export with one more sample; None where no input has a sample dim or it fails (warned)."""
    if all(d is None for d in sample_dims):
        return None
    try:
        return export_program(module, with_one_more_sample(inputs, sample_dims))
    except Exception as error:   # noqa: BLE001 - any failure only costs the batch dims
        _warn(f"the export with one more sample failed ({type(error).__name__}: {error})")
        return None


def dims_between(program: Any, grown: Any) -> Mapping[str, int | None]:
    """fx node name -> batch dim, from the program and the one with one more sample (each an
    ExportedProgram or anything with its `graph`); empty, with a warning, when their graphs differ."""
    first, second = list(program.graph.nodes), list(grown.graph.nodes)
    if [(n.name, n.target) for n in first] != [(n.name, n.target) for n in second]:
        _warn("its graph changes with the batch size")
        return {}
    return {a.name: compare(a.meta.get("val"), b.meta.get("val")) for a, b in zip(first, second)}


def compare(before: Any, after: Any) -> int | None:
    """The dim that grew by exactly one from `before` to `after` while no other dim changed."""
    if not isinstance(before, torch.Tensor) or not isinstance(after, torch.Tensor):
        return None
    if before.dim() != after.dim():
        return None
    changed = [d for d, (m, n) in enumerate(zip(before.shape, after.shape)) if m != n]
    if len(changed) != 1 or after.shape[changed[0]] != before.shape[changed[0]] + 1:
        return None
    return changed[0]


def _warn(reason: str) -> None:
    warnings.warn(f"capture cannot tell batch dims: {reason}; opaque ops will be replicated, "
                  f"not split by sample", stacklevel=3)
