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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ProgramShapes:
    """What `dims_between` reads of a program: per node, its name, its target (as text) and its
    tensor value's shape (None for other values); with `keys`, each node's `node_key` too, what
    rebatch.py matches a derived program against. It pickles: a forked worker's export sends it."""
    nodes: tuple[tuple[str, str, tuple[int, ...] | None], ...]
    keys: tuple[tuple, ...] | None = None


def program_shapes(program: Any, with_keys: bool = False) -> ProgramShapes:
    nodes = program.graph.nodes
    return ProgramShapes(tuple((n.name, str(n.target), _shape(n.meta.get("val"))) for n in nodes),
                         tuple(node_key(n) for n in nodes) if with_keys else None)


def program_keys(program: Any) -> tuple[tuple, ...]:
    """Each node's `node_key`: of a program (anything with its fx `graph`), or as its ProgramShapes
    recorded them."""
    if isinstance(program, ProgramShapes):
        if program.keys is None:
            raise ValueError("these ProgramShapes were recorded without their node keys")
        return program.keys
    return tuple(node_key(n) for n in program.graph.nodes)


def node_key(node: torch.fx.Node) -> tuple:
    """A node as two programs must agree on it: its name, kind, target, arguments (other nodes by
    name) and value (tensors by shape, stride, storage offset, dtype and device)."""
    named = torch.fx.node.map_aggregate((node.args, node.kwargs),
                                        lambda x: ("node", x.name) if isinstance(x, torch.fx.Node) else x)
    return (node.name, node.op, str(node.target), _plain(named), _value_key(node.meta.get("val")))


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _plain(v)) for k, v in value.items())
    return value


def _value_key(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), tuple(value.stride()), value.storage_offset(), value.dtype,
                value.device.type)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_value_key(v) for v in value))
    if isinstance(value, (torch.SymInt, torch.SymBool, torch.SymFloat)):
        return ("symbolic", str(value))
    return value


def _shape(value: Any) -> tuple[int, ...] | None:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None


def dims_between(program: Any, grown: Any, one_sample: bool = False) -> Mapping[str, int | None]:
    """fx node name -> batch dim, from the program and the one with one more sample (each an
    ExportedProgram, anything with its `graph`, or its ProgramShapes); empty when their graphs
    differ, with a warning unless the program's batch is `one_sample` (`is_one_sample`): export
    drops what broadcasts to a batch of one (Hugging Face's position ids, expanded to the batch),
    so such graphs differ by a node, and no plan splits one sample, so nothing is lost."""
    first, second = (x if isinstance(x, ProgramShapes) else program_shapes(x) for x in (program, grown))
    if [node[:2] for node in first.nodes] != [node[:2] for node in second.nodes]:
        if not one_sample:
            _warn("its graph changes with the batch size")
        return {}
    return {a[0]: compare(a[2], b[2]) for a, b in zip(first.nodes, second.nodes)}


def is_one_sample(program: Any, sample_dims: Mapping[str, int | None]) -> bool:
    """Whether every user input with a sample dim (`sample_dims`: placeholder name -> dim) holds
    one sample in `program`, and some input has one."""
    shapes = {name: shape for name, _, shape in program_shapes(program).nodes}
    sizes = [shapes[name][dim] for name, dim in sample_dims.items() if dim is not None and shapes.get(name)]
    return bool(sizes) and all(size == 1 for size in sizes)


def compare(before: tuple[int, ...] | None, after: tuple[int, ...] | None) -> int | None:
    """The dim that grew by exactly one from shape `before` to `after` while no other dim changed."""
    if before is None or after is None or len(before) != len(after):
        return None
    changed = [d for d, (m, n) in enumerate(zip(before, after)) if m != n]
    if len(changed) != 1 or after[changed[0]] != before[changed[0]] + 1:
        return None
    return changed[0]


def _warn(reason: str) -> None:
    warnings.warn(f"capture cannot tell batch dims: {reason}; opaque ops will be replicated, "
                  f"not split by sample", stacklevel=3)
