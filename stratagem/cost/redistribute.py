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
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from stratagem.space.tensor_layout import TensorLayout
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
    """Dijkstra's tree from one source state on one mesh: per state reached, (time, linked path)."""
    start: State
    mesh: tuple[int, ...]
    full_bytes: float
    groups: tuple
    prices: dict
    reached: dict

    def to(self, target: State) -> Redistribution:
        found = self.reached.get(target)
        if found is None:
            raise AssertionError(f"no re-scheduling path from {self.start} to {target}")  # every state reaches R*
        time_s, path = found
        return _result(self.start, _unlinked(path), time_s, self.mesh, self.full_bytes, self.groups, self.prices)


def plan_redistribution(src: TensorLayout, dst: TensorLayout, shape: tuple[int, ...], itemsize: int,
                        price: Price, native_all_to_all: bool = True) -> Redistribution:
    """Cheapest path from src's placements to dst's on their (common, regular) mesh."""
    partial_target = any(isinstance(p, Partial) for p in dst.placements)
    return shortest_paths(src, shape, itemsize, price, partial_target, native_all_to_all).to(dst.placements)


def shortest_paths(src: TensorLayout, shape: tuple[int, ...], itemsize: int, price: Price,
                   partial_target: bool, native_all_to_all: bool = True, known_moves: dict | None = None,
                   groups: tuple | None = None) -> Paths:
    """Cheapest paths from src's placements to every state (states with a Partial placement only
    when `partial_target`: case 6 runs only toward such a target). A heap entry's path is a linked
    list (previous path, transition), built into steps for the target asked (`Paths.to`).
    `known_moves`: each state's block count and `moves` by (state, mesh, rank, partial_target,
    native_all_to_all), shared by the runs of one re-scheduler (they do not depend on the size).
    `groups`: each mesh axis's device groups (`mesh_axis_groups(src)`), where the caller keeps them
    for every layout on the same block and mesh."""
    known_moves = {} if known_moves is None else known_moves
    mesh, rank = src.mesh_shape, len(shape)
    full = float(math.prod(shape) * itemsize)
    groups = mesh_axis_groups(src) if groups is None else groups
    prices: dict[tuple, float] = {}
    counter = 0
    heap: list = [(0.0, 0, counter, src.placements, None)]
    reached: dict[State, tuple[float, tuple | None]] = {}
    while heap:
        cost, hops, _, state, path = heapq.heappop(heap)
        if state in reached:
            continue
        reached[state] = (cost, path)
        key = (state, mesh, rank, partial_target, native_all_to_all)
        found = known_moves.get(key)
        if found is None:
            found = known_moves[key] = (_shard_count(state, mesh),
                                        moves(state, mesh, rank, partial_target, native_all_to_all))
        local = full / found[0]
        for nxt, kind, x, factor in found[1]:
            if nxt in reached:
                continue
            t = (nxt, kind, x, local * factor)
            step_s = 0.0
            if kind is not None:
                key = t[1:]
                step_s = prices.get(key)
                if step_s is None:
                    step_s = prices[key] = price(kind, t[3], groups[x])
            counter += 1
            heapq.heappush(heap, (cost + step_s, hops + 1, counter, nxt, (path, t)))
    return Paths(src.placements, mesh, full, groups, prices, reached)


def mesh_axis_groups(layout: TensorLayout) -> tuple:
    """Each mesh axis's device groups, the groups a step on that axis runs on."""
    return tuple(layout.axis_groups((x,)) for x in range(len(layout.mesh_shape)))


def _unlinked(path) -> list[Transition]:
    found = []
    while path is not None:
        path, t = path
        found.append(t)
    return found[::-1]


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
