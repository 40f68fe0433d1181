"""Producer flags (search.flags): a buffer several consumers keep is counted once, exactly, in FT's
cost problem; against the cost model's whole-strategy count (cost.sharing) and the simulator."""

from __future__ import annotations

import itertools

import pytest

from stratagem.cost import CostModel
from stratagem.cost.sharing import sharing_credits
from stratagem.search.ft import FTOptions
from stratagem.search.ft_peak import peak_frontier_tracking
from stratagem.search.space import additive_cost, build_search_space
from stratagem.sim.builder import simulate
from tests.search.graphs import fanout


@pytest.fixture(scope="module")
def model():
    return CostModel(fanout(readers=3), "v100-2x8", num_devices=2)


@pytest.fixture(scope="module")
def space(model):
    return build_search_space(model, coarsening=False)


def test_the_shared_tensor_is_flagged_on_its_producer(model, space):
    (shared,) = model.shared_tensors
    assert (shared.tensor, shared.producer, shared.keepers) == ("s", "add", ("fc1", "fc2", "fc3"))
    g = next(g for g, group in enumerate(space.groups) if group.anchor == "add")
    assert space.num_flags(g) == 2 and len(space.problem.node_mem[g]) == 2 * len(space.configs[g])


def _assignments(space):
    """Every strategy (small enough to enumerate) as a problem assignment with its flags cleared,
    and each group's indices over its flag values."""
    choices = [range(len(c)) for c in space.configs]
    for base in itertools.product(*choices):
        flagged = [[k * space.num_flags(g) + f for f in range(space.num_flags(g))] for g, k in enumerate(base)]
        yield [values[0] for values in flagged], flagged


def test_the_least_over_flags_is_the_exact_memory_of_every_strategy(model, space):
    """For every strategy: min over flag values of the problem's (memory, time) is the cost
    model's whole-strategy count, in which readers sharing one buffer pay it once."""
    checked = sharing = 0
    for base, flagged in _assignments(space):
        strategy, _ = space.strategy(base)
        exact = additive_cost(model, strategy)
        values = [space.problem.evaluate(a) for a in itertools.product(*flagged)]
        assert min(m for m, _ in values) == pytest.approx(exact[0], rel=1e-12)
        assert all(t == pytest.approx(exact[1], rel=1e-12) for _, t in values)   # flags change memory only
        readers = sum(strategy[q].devices == strategy["add"].devices and
                      model.input_layout(q, strategy[q], 0) == model.layouts.output_layout("add", strategy["add"])
                      for q in ("fc1", "fc2", "fc3"))
        sharing += readers >= 2
        checked += 1
    assert checked > 100 and sharing > 0      # cases where several readers share the buffer


def test_ft_finds_the_exact_frontier_over_strategies(model, space):
    """FT over the flagged problem gives the frontier of the exact (memory, time) of every strategy."""
    points = []
    for base, _ in _assignments(space):
        strategy, _ = space.strategy(base)
        points.append(additive_cost(model, strategy))
    points.sort()
    truth, best = [], float("inf")
    for mem, time in points:
        if time < best * (1 - 1e-12):
            truth.append((mem, time))
            best = time
    found = peak_frontier_tracking(space.problem, FTOptions(workers=1)).pairs
    assert len(found) == len(truth)
    for (m, t), (em, et) in zip(found, truth):
        assert m == pytest.approx(em, rel=1e-12) and t == pytest.approx(et, rel=1e-12)


def test_the_simulator_holds_one_buffer_for_readers_that_share_it(model):
    """Data parallel everywhere: the three readers read s as add lays it out, so s is kept once:
    the cost model gives back two of the three readers' copies, and the simulated peak is the
    cost model's count."""
    strategy = {op.name: next(c for c in model.configurations(op.name) if str(c) in ("b2@0-1", "d02@0-1"))
                for op in model.graph.ops}
    credits = list(sharing_credits(model, strategy))
    assert [num_bytes for num_bytes, _ in credits] == [2 * 64 * 256 * 4 / 2]
    mem, _ = additive_cost(model, strategy)
    assert simulate(model, strategy).peak_memory_bytes == pytest.approx(mem, rel=1e-12)
    assert model.plan_cost(strategy).memory_bytes == pytest.approx(mem, rel=1e-12)
