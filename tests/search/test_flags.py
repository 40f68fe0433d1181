"""Producer flags (search.flags): a buffer several consumers keep is counted once, exactly, in FT's
cost problem; against the cost model's whole-strategy count (cost.sharing) and the simulator."""

from __future__ import annotations


import numpy as np

import pytest

from stratagem.cost import CostModel
from stratagem.cost.sharing import sharing_credits
from stratagem.search.space import additive_cost
from stratagem.sim.builder import simulate
from tests.search.graphs import fanout
from tests.search.oracle import (
    assert_ft_finds_the_exact_frontier, bounded_strategies, build_uncapped_space, checked_strategies,
    space_assignments,
)


@pytest.fixture(scope="module")
def model():
    return CostModel(fanout(readers=3), "v100-2x8", num_devices=2)


@pytest.fixture(scope="module")
def space(model):
    return build_uncapped_space(model, coarsening=False)


def test_the_shared_tensor_is_flagged_on_its_producer(model, space):
    (shared,) = model.shared_tensors
    assert (shared.tensor, shared.producer, shared.keepers) == ("s", "add", ("fc1", "fc2", "fc3"))
    g = next(g for g, group in enumerate(space.groups) if group.anchor == "add")
    assert space.num_flags(g) == 2 and len(space.problem.node_mem[g]) == 2 * len(space.configs[g])


def test_the_least_over_flags_is_the_exact_memory_of_every_strategy(model, space):
    """For every strategy: min over flag values of the problem's (memory, time) is the cost
    model's whole-strategy count, in which readers sharing one buffer pay it once."""
    checked = sharing = 0
    for strategy, _ in checked_strategies(model, space):
        readers = sum(strategy[q].devices == strategy["add"].devices and
                      model.input_layout(q, strategy[q], 0) == model.layouts.output_layout("add", strategy["add"])
                      for q in ("fc1", "fc2", "fc3"))
        sharing += readers >= 2
        checked += 1
    assert checked > 100 and sharing > 0      # cases where several readers share the buffer


def test_ft_finds_the_exact_frontier_over_strategies(model, space):
    """FT over the flagged problem gives the frontier of the exact (memory, time) of every strategy."""
    assert_ft_finds_the_exact_frontier(model, space, (base for base, _ in space_assignments(space)))


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


def test_coarsened_groups_count_shared_buffers_and_transients_as_the_cost_model_does():
    """A captured decoder, coarsened (keepers and flagged edges inside groups, several crossing
    inputs to attention: search.levels): for sampled strategies, FT's (memory, time) at the
    flag and level values `index_of` gives is the cost model's own count, and no other values
    (sampled: there are too many to enumerate) go below it."""
    import warnings

    from stratagem.frontend import zoo
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = zoo.build("gpt-tiny-tiny", batch_size=8)
    decoder = CostModel(graph, "cpu-1x2", num_devices=2)
    space = build_uncapped_space(decoder)
    flagged = [g for g in range(len(space.groups)) if space.num_flags(g) > 1]
    assert flagged and len(decoder.shared_tensors) >= 2 and any(space.levels)
    rng = np.random.default_rng(0)
    for _ in range(12):
        base = [int(rng.integers(len(c))) * space.num_flags(g) for g, c in enumerate(space.configs)]
        strategy, _ = space.strategy(base)
        exact = additive_cost(decoder, strategy)
        found = space.problem.evaluate(space.index_of(decoder, strategy))
        assert found[0] == pytest.approx(exact[0], rel=1e-9) and found[1] == pytest.approx(exact[1], rel=1e-9)
        for _ in range(50):
            assignment = [k + int(rng.integers(space.num_flags(g))) for g, k in enumerate(base)]
            mem, time = space.problem.evaluate(assignment)
            assert mem >= exact[0] * (1 - 1e-9) and time == pytest.approx(exact[1], rel=1e-9)


def test_a_flagged_edge_inside_a_group_counts_the_kept_buffer_only_when_its_bit_is_set(model):
    """A group holding a reader of the shared tensor and (as if coarsened with it) its producer:
    the reader's term counts its input; flag clear, with add's buffer; set, the buffer is kept."""
    from stratagem.cost.transient import input_transient_bytes, op_term, op_transient_bytes
    from stratagem.search.coarsen import Group
    from stratagem.search.levels import member_inputs
    from stratagem.space import Edge
    (shared,) = model.shared_tensors
    edge = Edge("s", "add", "fc1")
    pairs = [(a, b) for a in model.configurations("add") for b in model.configurations("fc1")]
    members = {"fc1": tuple(b for _, b in pairs), "add": tuple(a for a, _ in pairs)}
    found = member_inputs(model, Group("fc1", ("fc1", "add"), "single"), members, len(pairs), (shared,), [edge])
    later = model.later_kept
    reader, producer = found["fc1"].term(later["fc1"]), found["add"].term(later["add"])
    differs = 0
    for k, (a, b) in enumerate(pairs):
        own = op_transient_bytes(model, "fc1", b)
        clear, kept = (op_term(own, [input_transient_bytes(model, edge, a, b, None, flag)], model.op_made("fc1", b),
                               later["fc1"]) for flag in (False, True))
        assert (reader[2 * k], reader[2 * k + 1]) == (clear, kept)
        assert producer[2 * k] == producer[2 * k + 1] == op_transient_bytes(model, "add", a) - later["add"]
        differs += clear != kept
    assert differs > 0


def test_unflagged_shared_tensors_are_overcharged_never_undercharged(model, monkeypatch):
    """Past MAX_FLAGS_PER_GROUP a shared tensor keeps the edge prices: FT's memory is at least the
    exact count for every strategy, and above it wherever two readers keep one buffer (the credit
    the flags give is missed). Where one reader keeps the buffer as it is, another reader's
    transient term does not know it and counts the buffer too, which shows once no earlier term
    is larger (cost.made's discounts)."""
    import stratagem.search.flags as flags
    monkeypatch.setattr(flags, "MAX_FLAGS_PER_GROUP", 0)
    unflagged = build_uncapped_space(model, coarsening=False)
    assert not any(unflagged.flags)
    over = 0
    for strategy, found, exact in bounded_strategies(model, unflagged):
        shared = sum(amount for amount, _ in sharing_credits(model, strategy))
        assert found > exact * (1 + 1e-12) or not shared
        over += shared > 0
    assert over > 0


def test_structurally_equal_flagged_edges_share_one_expansion_and_it_is_each_ones_own(model, space):
    """fc1, fc2 and fc3 read s alike: the space expands the flags of one of their edges and reuses
    it (repeated layers); each edge's tables equal its own expansion."""
    from stratagem.search.flags import expand_edge
    from stratagem.search.space import _edge_table
    readers = [(k, e) for k, e in enumerate(space.problem.edges) if e.name.startswith("s:add->")]
    assert len(readers) == 3
    assert readers[0][1].mem is readers[1][1].mem is readers[2][1].mem
    edges = {str(e): e for e in model.edges()}
    for _, costs in readers:
        edge = edges[costs.name]
        gs, gd = costs.src, costs.dst
        src_configs = space.members[gs][edge.src_op]
        dst_configs = space.members[gd][edge.dst_op]
        mem, time, names, transient, _ = _edge_table(model, edge, src_configs, dst_configs)
        own = expand_edge(model, edge, (mem, time, transient), space.flags[gs], space.flags[gd],
                          src_configs, dst_configs, names)
        for got, expected in zip((costs.mem, costs.time), own):
            np.testing.assert_array_equal(got, expected)
        from stratagem.cost.transient import op_term, op_transient_bytes
        reader = [op_transient_bytes(model, edge.dst_op, c) for c in dst_configs]
        reader = np.repeat(reader, space.num_flags(gd))[None, None, :]
        made = np.repeat([model.op_made(edge.dst_op, c) for c in dst_configs], space.num_flags(gd))[None, None, :]
        np.testing.assert_array_equal(costs.transient, op_term(reader, [tuple(own[2])], made,
                                                               model.later_kept[edge.dst_op]))
