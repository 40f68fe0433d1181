"""Weights offloaded to host memory as choices of FT's frontier (SpaceOptions.offload): the space
offers the state beside the sharded ones, FT's problem is exact for every strategy with it, FT
finds the exact frontier, offloaded plans reach below the leanest sharded one as simulated, and
the modes turn to offload when nothing else fits."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from stratagem.cluster import cluster_data
from stratagem.cost import CostModel
from stratagem.errors import ConfigError
from stratagem.report.plan_summary import plan_lines
from stratagem.search import modes, registry
from stratagem.search.context import NothingFits, context, fits_host, least_time
from stratagem.search.ft_search import FTSearchOptions
from stratagem.search.space import FT_SPACE
from tests.search.graphs import chain
from tests.search.oracle import (
    assert_ft_finds_the_exact_frontier, assert_leaner_as_simulated, build_uncapped_space, checked_strategies, space_assignments,
)

WITH_STATES = replace(FT_SPACE, state_sharding=True)
WITH_OFFLOAD = replace(WITH_STATES, offload=True)
CLUSTER = "a100-1x8"


def graph():
    return chain(layers=2, batch=2048, width=256)


@pytest.fixture(scope="module")
def model():
    return CostModel(graph(), CLUSTER, num_devices=2)


@pytest.fixture(scope="module")
def space(model):
    return build_uncapped_space(model, options=WITH_OFFLOAD, coarsening=False)


def test_the_space_offers_each_weight_owner_the_offloaded_state_too(space):
    for g, group in enumerate(space.groups):
        states = {c.state for c in space.configs[g]}
        owner = group.anchor.startswith("fc")
        assert states == ({"replicated", "sharded", "sharded_kept", "offloaded"} if owner else {"replicated"})


def test_the_problem_is_exact_for_every_strategy_with_offloaded_weights(model, space):
    checked = offloaded = 0
    for strategy, _ in checked_strategies(model, space):
        offloaded += any(c.offloaded for c in strategy.values())
        checked += 1
    assert checked >= 30 and offloaded >= 10


def test_ft_finds_the_exact_frontier_with_offloaded_weights(model, space):
    assert_ft_finds_the_exact_frontier(model, space, (base for base, _ in space_assignments(space)))


def test_offloaded_weights_reach_below_the_leanest_sharded_plan_as_simulated(model, space):
    sharded = build_uncapped_space(model, options=WITH_STATES, coarsening=False)
    assert_leaner_as_simulated(model, space, sharded, lambda c: c.offloaded)


def test_offload_is_asked_with_sharded_states():
    with pytest.raises(ConfigError, match="offload is a choice of the sharded weight states"):
        _ = FTSearchOptions(offload=True).searched_space


def test_when_nothing_else_fits_the_modes_turn_to_offloaded_weights():
    """A cap below the leanest plan with sharded weights and recomputation (the chain has no blocks
    to recompute) but above fsdp's offloaded plan: the modes search with offload as a choice and
    return FT's plan, which offloads and fits. On a cluster whose file has no host section they
    do not try (pricing an offloaded state there is refused) and nothing fits."""
    ctx = context(graph(), CLUSTER, 2)
    sharded = modes.frontier(ctx, FTSearchOptions(state_sharding=True))
    offloaded = registry.run(ctx, "fsdp", {"offload": True})
    assert offloaded.peak_memory_bytes < sharded.min_memory.peak_memory_bytes
    cap = (offloaded.peak_memory_bytes + sharded.min_memory.peak_memory_bytes) / 2
    chosen = modes.least_time_ft(context(graph(), CLUSTER, 2, memory_cap_bytes=cap))
    assert chosen.algorithm == "ft" and chosen.peak_memory_bytes <= cap
    assert any(c.offloaded for c in chosen.strategy.values())
    lean_hostless = modes.frontier(context(graph(), "cpu-1x2", 2), FTSearchOptions(state_sharding=True)).min_memory
    hostless = context(graph(), "cpu-1x2", 2, memory_cap_bytes=0.9 * lean_hostless.peak_memory_bytes)
    with pytest.raises(modes.NothingFits) as refused:
        modes.least_time_ft(hostless)
    assert not any(c.offloaded for c in refused.value.leanest.strategy.values())


def test_fsdp_offloads_every_shard_it_holds():
    ctx = context(graph(), CLUSTER, 2)
    sharded, offloaded = registry.run(ctx, "fsdp"), registry.run(ctx, "fsdp", {"offload": True})
    assert {op for op, c in sharded.strategy.items() if c.sharded_state} == \
        {op for op, c in offloaded.strategy.items() if c.offloaded}
    assert offloaded.iteration_time_s > sharded.iteration_time_s
    assert offloaded.details["memory_by_kind"]["host"] > 0
    with pytest.raises(ConfigError, match="offload frees each gathered weight after forward"):
        registry.run(ctx, "fsdp", {"offload": True, "reshard_after_forward": False})


def test_a_plan_whose_offloaded_state_overflows_its_hosts_does_not_fit(tmp_path):
    """Host memory is per node: the devices of a node offload into one host. A cluster whose
    hosts hold less than fsdp's offloaded state per node: the plan says it does not fit, and the
    choice refuses it whatever the device memory cap."""
    data = cluster_data(CLUSTER)
    ctx = context(graph(), CLUSTER, 2)
    plan = registry.run(ctx, "fsdp", {"offload": True})
    per_node = plan.details["host_memory"]["per_node_bytes"]
    assert per_node == pytest.approx(sum(ctx.model.host_bytes(plan.strategy)[:8]), rel=1e-12)
    assert per_node == pytest.approx(2 * plan.details["memory_by_kind"]["host"], rel=1e-12)
    assert fits_host(plan)
    data["host"]["memory_bytes"] = int(per_node) - 1
    small = tmp_path / "small-hosts.yaml"
    small.write_text(yaml.safe_dump(data))
    cramped = registry.run(context(graph(), str(small), 2), "fsdp", {"offload": True})
    assert not fits_host(cramped)
    shown = "\n".join(plan_lines(cramped))
    assert f"{per_node / 2**30:,.1f} GiB offloaded per node, of {(int(per_node) - 1) / 2**30:,.1f} GiB: DOES NOT FIT" in shown
    assert "offloaded ones in host memory" in shown and "in host memory" in "\n".join(plan_lines(plan))
    with pytest.raises(NothingFits, match="fits the host memory"):
        least_time([cramped], memory_cap_bytes=float("inf"))
    assert least_time([cramped, registry.run(ctx, "fsdp")], float("inf")).algorithm == "fsdp"
