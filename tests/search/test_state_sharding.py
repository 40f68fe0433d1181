"""Weights held sharded as choices of FT's frontier (SpaceOptions.state_sharding): FT's problem is
exact for every strategy with any states, FT finds the exact frontier, and the states reach
memory no replicated plan does; the simulator confirms each point."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stratagem.cost import CostModel
from stratagem.search.space import FT_SPACE
from tests.search.graphs import chain
from tests.search.oracle import (
    assert_ft_finds_the_exact_frontier, assert_leaner_as_simulated, build_uncapped_space, checked_strategies, space_assignments,
)

WITH_STATES = replace(FT_SPACE, state_sharding=True)


@pytest.fixture(scope="module")
def model():
    return CostModel(chain(layers=2, batch=2048, width=256), "v100-2x8", num_devices=2)


@pytest.fixture(scope="module")
def space(model):
    return build_uncapped_space(model, options=WITH_STATES, coarsening=False)


def test_the_space_offers_each_weight_owner_its_states(space):
    for g, group in enumerate(space.groups):
        states = {c.state for c in space.configs[g]}
        assert states == ({"replicated", "sharded", "sharded_kept"} if group.anchor.startswith("fc") else {"replicated"})


def test_the_problem_is_exact_for_every_strategy_with_states(model, space):
    checked = sharded = 0
    for strategy, _ in checked_strategies(model, space):
        sharded += any(c.sharded_state for c in strategy.values())
        checked += 1
    assert checked >= 30 and sharded > checked / 2


def test_ft_finds_the_exact_frontier_with_states(model, space):
    assert_ft_finds_the_exact_frontier(model, space, (base for base, _ in space_assignments(space)))


def test_sharded_states_reach_below_the_leanest_replicated_plan_as_simulated(model, space):
    plain = build_uncapped_space(model, options=FT_SPACE, coarsening=False)
    assert_leaner_as_simulated(model, space, plain, lambda c: c.sharded_state)


def test_when_nothing_fits_the_modes_turn_to_sharded_weights():
    """A cap below FT's leanest replicated plan: the modes return the practitioners' FSDP plan
    (saying why) when it fits; asked for sharded states, FT's own sharded plan, which fits too."""
    from stratagem.search import modes
    from stratagem.search.context import context
    from stratagem.search.ft_search import FTSearchOptions
    graph = chain(layers=2, batch=2048, width=256)
    plain = modes.frontier(context(graph, "v100-2x8", 2), FTSearchOptions())
    fsdp = registry_run(context(graph, "v100-2x8", 2), "fsdp")
    assert fsdp.peak_memory_bytes < plain.min_memory.peak_memory_bytes
    cap = (fsdp.peak_memory_bytes + plain.min_memory.peak_memory_bytes) / 2
    chosen = modes.least_time_ft(context(graph, "v100-2x8", 2, memory_cap_bytes=cap))
    assert chosen.algorithm == "fsdp" and "practitioners' plan" in chosen.details["chosen_because"]
    searched = modes.least_time_ft(context(graph, "v100-2x8", 2, memory_cap_bytes=cap), {"state_sharding": True})
    assert searched.algorithm == "ft" and searched.peak_memory_bytes <= cap
    assert any(c.sharded_state for c in searched.strategy.values())


def registry_run(ctx, name, options=None):
    from stratagem.search import registry
    return registry.run(ctx, name, options or {})


def test_plans_say_what_sharding_and_recomputation_save_and_cost():
    """fsdp on 2 devices holds half of both layers' weight, gradient and Adam state; the gathers
    cost time. The chain has no repeated blocks, so recomputation has nothing to say there."""
    from stratagem.search.context import context
    ctx = context(chain(layers=2, batch=2048, width=256), "v100-2x8", 2)
    plan = registry_run(ctx, "fsdp")
    effect = plan.details["weight_states_effect"]
    assert effect["saved_bytes"] == 2 * 256 * 256 * 4 * (1 + 1 + 2) / 2
    assert effect["time_s"] > 0 and "recompute_effect" not in plan.details
    replicated = {op: config.base for op, config in plan.strategy.items()}
    assert effect["time_s"] == ctx.model.plan_cost(plan.strategy).time_s - ctx.model.plan_cost(replicated).time_s
