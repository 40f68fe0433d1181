"""cost.stategraph: the compiled Dijkstra over a shared state graph settles every state with the
time and the path of the search written plainly with heapq (the reference below: entries (cost,
steps, counter, state, linked path), every transition to an unsettled state queued), also where
many paths tie, and from sources the graph did not reach before (it grows)."""

from __future__ import annotations

import heapq
import math

import pytest

from stratagem.cost.redistribute import moves, shortest_paths
from stratagem.space import REPLICATE, Partial, Shard
from stratagem.space.tensor_layout import TensorLayout

R, P = REPLICATE, Partial("sum")


def reference(start, mesh, rank, full, price, groups, partial_target, native):
    """Per state reached: (time, [(state, kind, axis, bytes), ...])."""
    heap, counter, reached = [(0.0, 0, 0, start, None)], 0, {}
    while heap:
        cost, hops, _, state, path = heapq.heappop(heap)
        if state in reached:
            continue
        reached[state] = (cost, path)
        local = full / math.prod(s for s, p in zip(mesh, state) if isinstance(p, Shard))
        for nxt, kind, x, factor in moves(state, mesh, rank, partial_target, native):
            if nxt in reached:
                continue
            t = (nxt, kind, x, local * factor)
            step_s = 0.0 if kind is None else price(kind, t[3], groups[x])
            counter += 1
            heapq.heappush(heap, (cost + step_s, hops + 1, counter, nxt, (path, t)))
    return {state: (cost, _unlinked(path)) for state, (cost, path) in reached.items()}


def _unlinked(path):
    found = []
    while path is not None:
        path, t = path
        found.append(t)
    return found[::-1]


def bandwidth_price(kind, num_bytes, groups):
    per_kind = {"all_gather": 1.0, "all_reduce": 2.0, "reduce_scatter": 1.0, "all_to_all": 0.75}
    return 1e-5 + per_kind[kind] * num_bytes * (len(groups[0]) - 1) / len(groups[0]) / 1e10


def tied_price(kind, num_bytes, groups):
    return 1.0                          # every collective costs the same: ties everywhere


def integer_price(kind, num_bytes, groups):
    """Whole seconds by kind: paths of other step counts tie exactly (one all-gather, two
    reduce-scatters), which the step count then breaks."""
    return {"all_gather": 2.0, "all_reduce": 3.0, "reduce_scatter": 1.0, "all_to_all": 1.0}[kind]


def every_state(mesh, rank):
    options = [R, P, *(Shard(d) for d in range(rank))]
    return [tuple(options[(i // len(options) ** a) % len(options)] for a in range(len(mesh)))
            for i in range(len(options) ** len(mesh))]


@pytest.mark.parametrize("price", [bandwidth_price, tied_price, integer_price])
@pytest.mark.parametrize("mesh, rank", [((8,), 2), ((2, 4), 2), ((2, 2, 2), 3), ((4, 2), 1)])
@pytest.mark.parametrize("native", [True, False])
def test_every_source_settles_every_state_as_the_plain_search_does(price, mesh, rank, native):
    shape = (16, 8, 4)[:rank]
    full = float(math.prod(shape) * 2)
    graphs, known = {}, {}
    for partial_target in (False, True):
        for start in every_state(mesh, rank):
            src = TensorLayout(0, mesh, start)
            groups = tuple(src.axis_groups((x,)) for x in range(len(mesh)))
            found = shortest_paths(src, shape, 2, price, partial_target, native, known, groups, graphs)
            expected = reference(start, mesh, rank, full, price, groups, partial_target, native)
            assert {s for s in found.graph.index if found.settled[found.graph.index[s]]} == set(expected)
            for target, (time_s, path) in expected.items():
                result = found.to(target)
                assert result.time_s == time_s
                assert result.states == (start, *(t[0] for t in path))
                assert [(s.kind, s.num_bytes) for s in result.steps] == \
                       [(kind, num_bytes) for _, kind, _, num_bytes in path if kind is not None]


def test_a_source_the_graph_did_not_reach_grows_it_and_unreached_states_are_refused():
    mesh, shape = (2, 4), (16, 8)
    graphs = {}
    first = shortest_paths(TensorLayout(0, mesh, (R, R)), shape, 2, bandwidth_price, False, graphs=graphs)
    assert (P, R) not in first.graph.index            # no Partial without a Partial source or target
    with pytest.raises(AssertionError, match="no re-scheduling path"):
        first.to((P, R))
    grown = shortest_paths(TensorLayout(0, mesh, (P, R)), shape, 2, bandwidth_price, False, graphs=graphs)
    assert len(grown.graph.states) > len(first.graph.states)
    assert grown.graph.states[:len(first.graph.states)] == first.graph.states     # the first's kept
    assert grown.to((R, R)).kinds == ("all_reduce",)
    again = shortest_paths(TensorLayout(0, mesh, (R, R)), shape, 2, bandwidth_price, False, graphs=graphs)
    assert again.graph is grown.graph and again.to((Shard(0), R)).time_s == first.to((Shard(0), R)).time_s
