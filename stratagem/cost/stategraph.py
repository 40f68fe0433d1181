"""Dijkstra over re-scheduling states, compiled: the state graph once per mesh, then a run per source and size.

redistribute.py's search visits the same states through the same transitions whatever the tensor's
size and wherever it starts; only the step prices and the source change. So the states (on one
mesh, tensor rank, whether a Partial target is allowed, all-to-all native or not) are enumerated
once (`StateGraph`, breadth first through `redistribute.moves` from the first source, extended by
the states a later source reaches that it lacks), with each state's transitions in the order
`moves` gives them, as arrays:

    move j of state s:  next[j], its price slot[j]  (j in starts[s] .. starts[s + 1])
    slot i:             (kind, axis, the state's shard count, factor): it moves
                        full_bytes / shards * factor bytes, priced price(kind, bytes, groups[axis])

A run for one tensor size prices each slot once and runs `dijkstra` below, which is heapq's lazy
Dijkstra exactly: entries (cost, steps, counter, state), the counter increasing with each push
(made only toward a state not yet settled), the least entry popped first, a popped state settled
once. Costs are summed in the same order along each path, so the times and the paths it settles
are those of the same search written with heapq and tuples (tests/cost/test_stategraph.py
compares them), at a small fraction of the time: the cost tables of hf:llama-7b run it 2,861
times over about 73 states each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit

State = tuple


@dataclass(frozen=True)
class StateGraph:
    """States and their transitions (see the module docstring)."""
    states: tuple[State, ...]
    index: dict
    starts: np.ndarray                  # [S + 1] each state's first move
    next_state: np.ndarray              # [M] where each move goes
    source: np.ndarray                  # [M] the state each move leaves
    slot: np.ndarray                    # [M] each move's price slot (-1: a free local step)
    slots: tuple[tuple, ...]            # (kind, axis, shard count, factor) per slot
    moves: tuple[tuple, ...]            # (kind, axis) per move


def state_graph(start: State, moves_of: Callable[[State], tuple[int, tuple]],
                base: StateGraph | None = None) -> StateGraph:
    """The graph of the states reachable from `start`: `base` (a graph of the same mesh, rank and
    rules) with the states it lacks added after its own, or a new one. moves_of(state) gives (its
    shard count, its moves as redistribute.moves gives them: (next state, kind or None, axis,
    factor))."""
    if base is not None and start in base.index:
        return base
    states, index = (list(base.states), dict(base.index)) if base is not None else ([], {})
    starts = [int(x) for x in base.starts] if base is not None else [0]
    nexts, sources, slot_of = ([int(x) for x in a] for a in (base.next_state, base.source, base.slot)) \
        if base is not None else ([], [], [])
    move_list = list(base.moves) if base is not None else []
    slots = {slot: i for i, slot in enumerate(base.slots)} if base is not None else {}
    at = len(states)
    index[start] = len(states)
    states.append(start)
    while at < len(states):
        shards, found = moves_of(states[at])
        for nxt, kind, axis, factor in found:
            if nxt not in index:
                index[nxt] = len(states)
                states.append(nxt)
            slot = -1 if kind is None else slots.setdefault((kind, axis, shards, factor), len(slots))
            nexts.append(index[nxt])
            sources.append(at)
            slot_of.append(slot)
            move_list.append((kind, axis))
        starts.append(len(nexts))
        at += 1
    as_array = lambda xs: np.array(xs, dtype=np.int64)   # noqa: E731
    return StateGraph(tuple(states), index, as_array(starts), as_array(nexts), as_array(sources), as_array(slot_of),
                      tuple(slots), tuple(move_list))


@njit(cache=True, nogil=True)
def dijkstra(starts, next_state, step_s, start):  # pragma: no cover - compiled
    """Per state: its least cost from state `start`, and the move that settled it (-1: the
    source, or not reached); heapq's order (cost, steps, counter)."""
    n, m = len(starts) - 1, len(next_state)
    cost = np.full(n, np.inf)
    settled_by = np.full(n, -1, dtype=np.int64)
    settled = np.zeros(n, dtype=np.bool_)
    heap_cost = np.empty(m + 1)
    heap_hops = np.empty(m + 1, dtype=np.int64)
    heap_count = np.empty(m + 1, dtype=np.int64)
    heap_state = np.empty(m + 1, dtype=np.int64)
    heap_move = np.empty(m + 1, dtype=np.int64)
    size, counter = 0, 0
    size = _push(heap_cost, heap_hops, heap_count, heap_state, heap_move, size, 0.0, 0, 0, start, -1)
    while size > 0:
        c, h, s, j = heap_cost[0], heap_hops[0], heap_state[0], heap_move[0]
        size = _pop(heap_cost, heap_hops, heap_count, heap_state, heap_move, size)
        if settled[s]:
            continue
        settled[s] = True
        cost[s] = c
        settled_by[s] = j
        for k in range(starts[s], starts[s + 1]):
            t = next_state[k]
            if settled[t]:
                continue
            counter += 1
            size = _push(heap_cost, heap_hops, heap_count, heap_state, heap_move, size, c + step_s[k], h + 1,
                         counter, t, k)
    return cost, settled_by, settled


@njit(cache=True, nogil=True)
def _less(cost, hops, count, a, b):  # pragma: no cover - compiled
    if cost[a] != cost[b]:
        return cost[a] < cost[b]
    if hops[a] != hops[b]:
        return hops[a] < hops[b]
    return count[a] < count[b]


@njit(cache=True, nogil=True)
def _swap(cost, hops, count, state, move, a, b):  # pragma: no cover - compiled
    cost[a], cost[b] = cost[b], cost[a]
    hops[a], hops[b] = hops[b], hops[a]
    count[a], count[b] = count[b], count[a]
    state[a], state[b] = state[b], state[a]
    move[a], move[b] = move[b], move[a]


@njit(cache=True, nogil=True)
def _push(cost, hops, count, state, move, size, c, h, n, s, j):  # pragma: no cover - compiled
    cost[size], hops[size], count[size], state[size], move[size] = c, h, n, s, j
    i = size
    while i > 0:
        parent = (i - 1) // 2
        if not _less(cost, hops, count, i, parent):
            break
        _swap(cost, hops, count, state, move, i, parent)
        i = parent
    return size + 1


@njit(cache=True, nogil=True)
def _pop(cost, hops, count, state, move, size):  # pragma: no cover - compiled
    size -= 1
    _swap(cost, hops, count, state, move, 0, size)
    i = 0
    while True:
        least, left, right = i, 2 * i + 1, 2 * i + 2
        if left < size and _less(cost, hops, count, left, least):
            least = left
        if right < size and _less(cost, hops, count, right, least):
            least = right
        if least == i:
            return size
        _swap(cost, hops, count, state, move, i, least)
        i = least
