"""Who holds a weight or buffer: the first op that reads it (its owner). The cost model charges
the owner for the tensor's memory and gradient sync, the simulator allocates it there, and the
runtime places the parameter as the owner reads it; other readers get it over an edge."""

from __future__ import annotations

from stratagem.ir.graph import Graph, Op
from stratagem.ir.tensor import Role

PARAMETER_ROLES = (Role.WEIGHT, Role.BUFFER)


def weight_owner(graph: Graph, tensor: str) -> str | None:
    readers = graph.consumers.get(tensor, ())
    return readers[0].name if readers else None


def owned_parameters(graph: Graph, op: Op) -> tuple[int, ...]:
    """Input positions of the weights and buffers this op owns (first occurrence of each)."""
    found, seen = [], set()
    for i, t in enumerate(op.inputs):
        if t in seen:
            continue
        seen.add(t)
        if graph.tensors[t].role in PARAMETER_ROLES and weight_owner(graph, t) == op.name:
            found.append(i)
    return tuple(found)
