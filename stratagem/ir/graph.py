"""Graph: operators over named tensors, kept in a stable topological order."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

from stratagem.errors import GraphError
from stratagem.ir.attrs import Attrs
from stratagem.ir.tensor import Role, TensorSpec
from stratagem.ir.printer import format_graph


@dataclass(frozen=True)
class Op:
    """One operator: `kind` names its TDL description (or "opaque"), `module` the nn.Module it came
    from, `saved` the tensors autograd keeps for its backward (recorded at capture)."""

    name: str
    kind: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Attrs = field(default_factory=Attrs)
    module: str = ""
    saved: tuple[str, ...] | None = None   # tensors autograd keeps for backward (None: unknown)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        if self.saved is not None:
            object.__setattr__(self, "saved", tuple(self.saved))
        if not isinstance(self.attrs, Attrs):
            object.__setattr__(self, "attrs", Attrs(self.attrs))

    def __str__(self) -> str:
        return f"{self.name} = {self.kind}({', '.join(self.inputs)}) -> {', '.join(self.outputs)}"


def topological_order(ops: Iterable[Op], available: Iterable[str]) -> tuple[Op, ...]:
    """Kahn's algorithm; among ready ops the earliest in the given order goes first (stable)."""
    ops = list(ops)
    produced_by = {t: i for i, op in enumerate(ops) for t in op.outputs}
    waiting = [sum(1 for t in set(op.inputs) if t in produced_by) for op in ops]
    consumers: dict[int, list[int]] = {}
    for i, op in enumerate(ops):
        for t in set(op.inputs):
            if t in produced_by:
                consumers.setdefault(produced_by[t], []).append(i)
    ready = [i for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in consumers.get(i, ()):
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, j)
    if len(order) != len(ops):
        stuck = [ops[i].name for i in range(len(ops)) if i not in set(order)][:5]
        raise GraphError("graph has a cycle", expected="an acyclic graph",
                         got=f"ops in a cycle or fed by one: {stuck}",
                         hint="Check that no op consumes its own output")
    return tuple(ops[i] for i in order)


@dataclass(frozen=True)
class Graph:
    """Tensors by name and ops in topological order. Build with `Graph.build` to get the order."""

    name: str
    tensors: Mapping[str, TensorSpec]
    ops: tuple[Op, ...]
    outputs: tuple[str, ...]
    meta: Attrs = field(default_factory=Attrs)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tensors", MappingProxyType(dict(self.tensors)))
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        if not isinstance(self.meta, Attrs):
            object.__setattr__(self, "meta", Attrs(self.meta))

    def __reduce__(self):
        """Pickled as its fields (a read-only view does not pickle; the derived views are built
        again): plans with their graphs travel between processes (stratagem.forked)."""
        return Graph, (self.name, dict(self.tensors), self.ops, self.outputs, self.meta)

    @classmethod
    def build(cls, name: str, tensors: Iterable[TensorSpec], ops: Iterable[Op],
              outputs: Iterable[str], meta: Mapping[str, Any] | None = None) -> "Graph":
        tensor_map: dict[str, TensorSpec] = {}
        for spec in tensors:
            if spec.name in tensor_map:
                raise GraphError("duplicate tensor name", expected="unique names", got=repr(spec.name))
            tensor_map[spec.name] = spec
        sources = [n for n, s in tensor_map.items() if s.role is not Role.ACTIVATION]
        return cls(name, tensor_map, topological_order(ops, sources), tuple(outputs), Attrs(meta or {}))

    # ---- derived views -------------------------------------------------------------------------
    @cached_property
    def producer(self) -> Mapping[str, Op]:
        return MappingProxyType({t: op for op in self.ops for t in op.outputs})

    @cached_property
    def consumers(self) -> Mapping[str, tuple[Op, ...]]:
        found: dict[str, list[Op]] = {}
        for op in self.ops:
            for t in dict.fromkeys(op.inputs):
                found.setdefault(t, []).append(op)
        return MappingProxyType({t: tuple(ops) for t, ops in found.items()})

    @cached_property
    def op_index(self) -> Mapping[str, int]:
        return MappingProxyType({op.name: i for i, op in enumerate(self.ops)})

    def op(self, name: str) -> Op:
        try:
            return self.ops[self.op_index[name]]
        except KeyError:
            raise GraphError(f"no op named {name!r} in graph {self.name!r}",
                             hint=f"Ops include {[o.name for o in self.ops[:5]]}") from None

    def tensors_with_role(self, role: Role) -> tuple[TensorSpec, ...]:
        return tuple(s for s in self.tensors.values() if s.role is role)

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.tensors_with_role(Role.INPUT))

    @property
    def batch_sizes(self) -> frozenset[int]:
        """The sizes of the graph inputs' sample dims (one, for a batch every input shares)."""
        return frozenset(self.tensors[t].shape[self.tensors[t].sample_dim] for t in self.inputs
                         if self.tensors[t].sample_dim is not None)

    @property
    def weights(self) -> tuple[TensorSpec, ...]:
        return self.tensors_with_role(Role.WEIGHT)

    @property
    def num_parameters(self) -> int:
        return sum(s.num_elements for s in self.weights)

    @property
    def parameter_bytes(self) -> int:
        return sum(s.num_bytes for s in self.weights)

    @cached_property
    def requires_grad(self) -> frozenset[str]:
        """Tensors that backward produces a gradient for: weights and everything computed from them."""
        needs = {s.name for s in self.weights}
        for op in self.ops:
            if any(t in needs for t in op.inputs):
                needs.update(op.outputs)
        return frozenset(needs)

    def __len__(self) -> int:
        return len(self.ops)

    def __str__(self) -> str:
        return format_graph(self)
