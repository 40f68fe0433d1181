"""One move per tensor and layout: which edge re-schedules a tensor that several consumers read.

The runtime moves a tensor into a layout once a step, for its first reader in program order, and
every later reader asking for that layout reads the same copy, released after its last reader
(runtime.execute: `_read`, `released_after`); autograd sums the readers' gradients into the copy
and moves the sum back once. So among the edges of one tensor from one producer (or one graph
input; a weight's edges are the owner's business, cost.weight_state), call them its family:

    mover(k) = the edge j of k's family, k included, whose consumer comes first in program
               order among those that re-schedule the tensor (forward steps) into k's layout;
               k itself when k re-schedules nothing

`mover(k) == k`: k moves the tensor (forward steps, and its gradient back after every reader's
backward) and holds the copy until the last reader is done with it; otherwise k's consumer
reads mover(k)'s copy, at no cost of its own. The family's first consumer always moves what it
re-schedules, whatever the others read.

Edge-by-edge pricing (TensorOpt Eq. 2: cost.edgecost, the cost model's additive totals, FT's
tables) charges every edge its own steps and kept copy: j readers of one layout are charged j
moves where the runtime makes one, an overcharge, never an undercharge. The simulator
(sim.state.SimState.mover_of) counts moves as the runtime makes them, and so do the busy bounds
that must stay under it (search.bounds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stratagem.cost.edgecost import is_weight_edge
from stratagem.space import Configuration, Edge


def families(model) -> dict[int, tuple[int, ...]]:
    """Per edge index that has siblings: the other edges of its family (the module's docstring)."""
    graph, by_source = model.graph, {}
    for k, e in enumerate(model.edges()):
        if not is_weight_edge(graph, e.tensor, e.src_op):
            by_source.setdefault((e.tensor, e.src_op), []).append(k)
    return {k: tuple(j for j in family if j != k) for family in by_source.values() if len(family) > 1 for k in family}


def target_layout(model, edge: Edge, strategy: Mapping[str, Configuration]):
    """The layout edge's consumer reads its tensor in (its first input of that tensor)."""
    index = model.graph.op(edge.dst_op).inputs.index(edge.tensor)
    return model.input_layout(edge.dst_op, strategy[edge.dst_op], index)


def mover(model, strategy: Mapping[str, Configuration], k: int, family: Sequence[int] | None,
          position: Mapping[str, int], moves) -> int:
    """mover(k) of the module's docstring. `family`: k's siblings (`families`), None for none;
    `position`: each op's place in program order; `moves(j)`: whether edge j has forward steps
    under `strategy`."""
    if not family or not moves(k):
        return k
    edges = model.edges()
    target, first = target_layout(model, edges[k], strategy), k
    for j in family:
        if (position[edges[j].dst_op] < position[edges[first].dst_op]
                and target_layout(model, edges[j], strategy) == target and moves(j)):
            first = j
    return first


def first_readers(model) -> frozenset[int]:
    """The edges whose moves every strategy makes as priced: those without siblings, and the
    first consumer's edge of each family (a lower bound on the moves: search.bounds)."""
    position = {op.name: i for i, op in enumerate(model.graph.ops)}
    edges, found = model.edges(), set(range(len(model.edges())))
    for k, family in families(model).items():
        if any(position[edges[j].dst_op] < position[edges[k].dst_op] for j in family):
            found.discard(k)
    return frozenset(found)


__all__ = ["families", "first_readers", "mover", "target_layout"]
