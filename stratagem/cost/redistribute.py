"""Re-scheduling on one mesh: the cheapest sequence of single collectives (TensorOpt §4.2, Fig. 5).

States are per-axis placements of a tensor on a fixed mesh. Several axes may shard one dim; the
outer axis always splits first (DTensor's default shard order), and every step keeps that order.
One step changes the placement on one axis x (the others stay), as in PyTorch's
`torch/distributed/tensor/_redistribute.py` (`DTensorRedistributePlanner.get_next_state`):

  case  on axis x          step              allowed when                             n per group
  1     S(a) -> S(b)       all_to_all        x is the last axis sharding a, and after   local
                                             every axis sharding b (without a native
                                             all-to-all: all_gather, local * mesh[x],
                                             then a local chunk; the gathered block is
                                             scratch)
  2     S(d) -> R          all_gather        x is the last axis sharding d              local * mesh[x]
  3     P   -> R           all_reduce        always                                     local
  4     R   -> S(d)        local slice, free x after every axis sharding d
  5     P   -> S(d)        reduce_scatter    x after every axis sharding d              local
  6     R   -> P           local, free       only when the target has a P

`local` = bytes of one device's block in the current state; every step runs on all groups of axis
x at once, so it is priced as a concurrent collective (`price(kind, n, groups)`, contention
included). `plan_redistribution` runs Dijkstra from the source state to the target over these
transitions (`next_states`); ties go to fewer steps, then to the order transitions are generated.
Dijkstra runs to the end once per source (`shortest_paths`): the path it settles for a state is the
one a search that stopped there would return, so one run answers every target from that source.
It runs compiled over the mesh's state graph, built once for every source and size (cost.stategraph).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from stratagem.space.tensor_layout import TensorLayout
from stratagem.cost.stategraph import StateGraph, dijkstra, state_graph
from stratagem.cost.steps import CommStep
from stratagem.space import REPLICATE, Partial, Placement, Shard

State = tuple[Placement, ...]
Price = Callable[[str, float, tuple[tuple[int, ...], ...]], float]


@dataclass(frozen=True)
class Redistribution:
    steps: tuple[CommStep, ...]
    states: tuple[State, ...]           # the path, source first
    time_s: float
    scratch_bytes: float                # the largest intermediate block along the path (the source
                                        # and destination blocks are the two ends' own buffers)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(step.kind for step in self.steps)


Transition = tuple  # (state, kind or None for a free local step, axis, num_bytes)


def local_bytes(state: State, mesh: tuple[int, ...], full_bytes: float) -> float:
    return full_bytes / _shard_count(state, mesh)


def _shard_count(state: State, mesh: tuple[int, ...]) -> int:
    """Into how many blocks the state cuts the tensor."""
    return math.prod(s for s, p in zip(mesh, state) if isinstance(p, Shard))


def next_states(state: State, mesh: tuple[int, ...], rank: int, full_bytes: float,
                target_has_partial: bool, native_all_to_all: bool = True) -> Iterator[Transition]:
    """Every one-step transition from `state`, as (state, kind, axis, num_bytes); plain tuples,
    as Dijkstra below makes millions of them on a large space."""
    local = local_bytes(state, mesh, full_bytes)
    for nxt, kind, x, factor in moves(state, mesh, rank, target_has_partial, native_all_to_all):
        yield nxt, kind, x, local * factor


def moves(state: State, mesh: tuple[int, ...], rank: int, target_has_partial: bool,
          native_all_to_all: bool = True) -> tuple[tuple[State, str | None, int, int], ...]:
    """Every one-step transition from `state` whatever the tensor's size, as (state, kind, axis,
    factor): it moves factor x the current block's bytes (0 for a free local step, the axis's size
    for a gather). Without `native_all_to_all`, case 1 is an all-gather of the axis followed by a
    local chunk (DTensor's fallback on gloo)."""
    shards, partial = tuple(Shard(d) for d in range(rank)), Partial("sum")
    last_axis = [-1] * rank                 # per tensor dim: the last mesh axis sharding it
    for a, p in enumerate(state):
        if isinstance(p, Shard):
            last_axis[p.dim] = a
    found = []
    for x, p in enumerate(state):
        head, tail = state[:x], state[x + 1:]
        after = [b for b in range(rank) if last_axis[b] < x]      # dims x may shard next (in order)
        if isinstance(p, Shard):
            if last_axis[p.dim] == x:
                for b in after:
                    if b != p.dim:
                        if native_all_to_all:
                            found.append(((*head, shards[b], *tail), "all_to_all", x, 1))          # 1
                        else:
                            found.append(((*head, shards[b], *tail), "all_gather", x, mesh[x]))    # 1
                found.append(((*head, REPLICATE, *tail), "all_gather", x, mesh[x]))               # 2
        elif isinstance(p, Partial):
            found.append(((*head, REPLICATE, *tail), "all_reduce", x, 1))                         # 3
            for d in after:
                found.append(((*head, shards[d], *tail), "reduce_scatter", x, 1))                 # 5
        else:
            for d in after:
                found.append(((*head, shards[d], *tail), None, x, 0))                             # 4
            if target_has_partial:
                found.append(((*head, partial, *tail), None, x, 0))                               # 6
    return tuple(found)


@dataclass(frozen=True)
class Paths:
    """Dijkstra's tree from one source state on one mesh (cost.stategraph): per state, its least
    time and the move that settled it."""
    start: State
    mesh: tuple[int, ...]
    full_bytes: float
    groups: tuple
    prices: dict
    graph: StateGraph
    time_s: np.ndarray
    settled_by: np.ndarray
    settled: np.ndarray
    slot_bytes: tuple[float, ...]

    def to(self, target: State) -> Redistribution:
        at = self.graph.index.get(target)
        if at is None or not self.settled[at]:
            raise AssertionError(f"no re-scheduling path from {self.start} to {target}")  # every state reaches R*
        return _result(self.start, self._path(at), float(self.time_s[at]), self.mesh, self.full_bytes, self.groups,
                       self.prices)

    def _path(self, at: int) -> list[Transition]:
        graph, found = self.graph, []
        move = self.settled_by[at]
        while move >= 0:
            kind, axis = graph.moves[move]
            slot = graph.slot[move]
            found.append((graph.states[graph.next_state[move]], kind, axis, self.slot_bytes[slot] if slot >= 0 else 0.0))
            move = self.settled_by[graph.source[move]]
        return found[::-1]


def plan_redistribution(src: TensorLayout, dst: TensorLayout, shape: tuple[int, ...], itemsize: int,
                        price: Price, native_all_to_all: bool = True) -> Redistribution:
    """Cheapest path from src's placements to dst's on their (common, regular) mesh."""
    partial_target = any(isinstance(p, Partial) for p in dst.placements)
    return shortest_paths(src, shape, itemsize, price, partial_target, native_all_to_all).to(dst.placements)


def shortest_paths(src: TensorLayout, shape: tuple[int, ...], itemsize: int, price: Price,
                   partial_target: bool, native_all_to_all: bool = True, known_moves: dict | None = None,
                   groups: tuple | None = None, graphs: dict | None = None) -> Paths:
    """Cheapest paths from src's placements to every state (states with a Partial placement only
    when `partial_target`: case 6 runs only toward such a target), as cost.stategraph runs them:
    the graph of its mesh (`graphs`: the caller's cache of them, by mesh, rank and rules), each
    price slot priced once for this size, then the compiled Dijkstra. `known_moves`: each state's
    block count and `moves` by (state, mesh, rank, partial_target, native_all_to_all), shared by
    the graphs of one re-scheduler. `groups`: each mesh axis's device groups (`mesh_axis_groups(src)`), where the
    caller keeps them for every layout on the same block and mesh."""
    known_moves = {} if known_moves is None else known_moves
    graphs = {} if graphs is None else graphs
    mesh, rank = src.mesh_shape, len(shape)
    full = float(math.prod(shape) * itemsize)
    groups = mesh_axis_groups(src) if groups is None else groups
    key = (mesh, rank, partial_target, native_all_to_all)
    graph = graphs[key] = state_graph(src.placements, lambda state: _moves_of(
        state, mesh, rank, partial_target, native_all_to_all, known_moves), graphs.get(key))
    prices: dict[tuple, float] = {}
    slot_s, slot_bytes = np.zeros(len(graph.slots) + 1), []      # the last: a free step's 0 s
    for i, (kind, axis, shards, factor) in enumerate(graph.slots):
        num_bytes = full / shards * factor
        step = (kind, axis, num_bytes)
        if step not in prices:
            prices[step] = price(kind, num_bytes, groups[axis])
        slot_s[i] = prices[step]
        slot_bytes.append(num_bytes)
    time_s, settled_by, settled = dijkstra(graph.starts, graph.next_state, slot_s[graph.slot],
                                           graph.index[src.placements])
    return Paths(src.placements, mesh, full, groups, prices, graph, time_s, settled_by, settled, tuple(slot_bytes))


def _moves_of(state: State, mesh: tuple[int, ...], rank: int, partial_target: bool, native_all_to_all: bool,
              known: dict) -> tuple[int, tuple]:
    key = (state, mesh, rank, partial_target, native_all_to_all)
    found = known.get(key)
    if found is None:
        found = known[key] = (_shard_count(state, mesh), moves(state, mesh, rank, partial_target, native_all_to_all))
    return found


def mesh_axis_groups(layout: TensorLayout) -> tuple:
    """Each mesh axis's device groups, the groups a step on that axis runs on."""
    return tuple(layout.axis_groups((x,)) for x in range(len(layout.mesh_shape)))


def _result(start: State, path: list[Transition], time_s: float, mesh: tuple[int, ...], full: float,
            groups: list, prices: dict) -> Redistribution:
    states = (start, *(t[0] for t in path))
    steps = tuple(CommStep(kind, groups[axis], num_bytes, prices[(kind, axis, num_bytes)])
                  for _, kind, axis, num_bytes in path if kind is not None)
    gathered = [num_bytes for (state, kind, _, num_bytes), before in zip(path, states)
                if kind == "all_gather" and not _replicated_after(state, before)]
    scratch = max([*(local_bytes(s, mesh, full) for s in states[1:-1]), *gathered], default=0.0)
    return Redistribution(steps, states, time_s, scratch)


def _replicated_after(state: State, before: State) -> bool:
    """Whether a step's result is its all-gather's output (S -> R), not a chunk of it (S(a) -> S(b)
    by all-gather + chunk, whose gathered block is scratch)."""
    return any(isinstance(b, Shard) and a == REPLICATE for a, b in zip(state, before))
