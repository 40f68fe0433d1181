"""Choosing from a frontier: the least simulated time under the cap, never slower than data parallel."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stratagem import forked, zoo
from stratagem.errors import ConfigError
from stratagem.plan import Frontier
from stratagem.search.context import NothingFits, context
from stratagem.search.ft_search import FTSearchOptions, frontier
from stratagem.search.modes import mini_time
from stratagem.search.strategies import data_parallel_strategy


@pytest.fixture(scope="module")
def front():
    graph = zoo.build("mlp-tiny")
    return frontier(context(graph, "cpu-1x2", 2))


def test_the_frontier_carries_data_parallel_simulated(front):
    ctx = context(zoo.build("mlp-tiny"), "cpu-1x2", 2)
    (dp,) = front.alternatives
    assert dp.algorithm == "data-parallel" and dict(dp.strategy) == data_parallel_strategy(ctx)
    assert dp.iteration_time_s > 0 and dp.peak_memory_bytes > 0
    assert dp not in list(front)                       # not a frontier point


def test_mini_time_weighs_the_alternatives_under_the_cap(front):
    faster = replace(front.alternatives[0], iteration_time_s=0.5 * min(p.iteration_time_s for p in front))
    both = Frontier(list(front), front.details, [faster])
    assert mini_time(both, float("inf")) is faster
    assert mini_time(both, faster.peak_memory_bytes * 0.999) is not faster     # over the cap: not chosen
    least = min(p.peak_memory_bytes for p in [*front, faster])
    with pytest.raises(NothingFits):
        mini_time(both, least * 0.5)


def test_alternatives_survive_save_and_load(front, tmp_path):
    front.save(tmp_path / "front.json")
    loaded = Frontier.load(tmp_path / "front.json")
    assert [p.iteration_time_s for p in loaded.alternatives] == [p.iteration_time_s for p in front.alternatives]
    assert len(loaded) == len(front)


def test_the_modes_try_meshes_of_three_times_a_power_of_two():
    from stratagem import cluster as clusters
    from stratagem.search.modes import device_counts
    cluster = clusters.load("v100-2x8")
    assert device_counts(cluster) == [1, 2, 3, 4, 6, 8, 12, 16]
    assert device_counts(cluster, 5, 13) == [6, 8, 12, 13]
    assert device_counts(cluster, 7, 7) == [7]


def test_a_faster_practitioners_plan_that_fits_is_chosen_over_fts_and_says_why(monkeypatch):
    """The modes never return a plan slower than the practitioners' settings (fsdp, fsdp with every
    block recomputed, fsdp-tp) where one fits: given a practitioners' plan faster than FT's choice,
    it is returned; given a slower one, FT's stays."""
    from stratagem.search import modes
    ctx = context(zoo.build("gpt-tiny-tiny"), "a100-1x8", 8)
    chosen_by_ft = mini_time(modes.frontier_and_stages(ctx, None, "no"), ctx.memory_cap_bytes)
    real = modes._practitioners_fitting(ctx, modes._practitioners_plans(ctx), "because")
    assert real is not None and "because; this is the practitioners' plan" in real.details["chosen_because"]
    assert real.graph is ctx.graph
    for factor, expected in ((0.5, "practitioners"), (2.0, "ft")):
        quicker = replace(real, iteration_time_s=factor * chosen_by_ft.iteration_time_s)
        monkeypatch.setattr(modes, "_practitioners_fitting", lambda ctx, plans, why, plan=quicker: plan)
        chosen = modes.least_time_ft(ctx, {"pipeline": "no"})
        assert (chosen is quicker) == (expected == "practitioners")
        if expected == "ft":
            assert chosen.algorithm == "ft" and chosen.iteration_time_s == chosen_by_ft.iteration_time_s


def test_graphs_without_repeated_blocks_weigh_no_practitioners_plan(monkeypatch):
    from stratagem.search import modes
    monkeypatch.setattr(modes, "_practitioners_fitting", lambda *a: pytest.fail("weighed"))
    plan = modes.least_time_ft(context(zoo.build("mlp-tiny"), "cpu-1x2", 2))
    assert plan.iteration_time_s > 0


@pytest.mark.parametrize("model, cluster, devices", [("gpt-tiny", "v100-2x8", 4), ("gpt-tiny-tiny", "v100-2x8", 8)])
def test_ruling_points_out_by_their_busy_bound_chooses_the_same_plan(model, cluster, devices):
    """FT's frontier asked only for the least time under a cap (ft_search's busy-bound ruling):
    at every cap from the leanest point to above the largest, the plan chosen is the one chosen
    from every point simulated, and some caps leave points out (the ruling is not vacuous)."""
    ctx = context(zoo.build(model), cluster, devices)
    whole = frontier(ctx)
    peaks = sorted({p.peak_memory_bytes for p in [*whole, *whole.alternatives]})
    ruled_out = 0
    for cap in [*peaks[::3], peaks[-1] * 2]:
        lean = frontier(ctx, least_time_under=cap)
        try:
            expected = mini_time(whole, cap)
        except NothingFits:
            with pytest.raises(NothingFits):
                mini_time(lean, cap)
            assert len(list(lean)) == len(list(whole))       # nothing fits: nothing ruled out
            continue
        chosen = mini_time(lean, cap)
        assert (dict(chosen.strategy), chosen.iteration_time_s, chosen.peak_memory_bytes) == \
               (dict(expected.strategy), expected.iteration_time_s, expected.peak_memory_bytes)
        assert len(list(lean)) + lean.details.get("ruled_out", {}).get("points", 0) == len(list(whole))
        ruled_out += lean.details.get("ruled_out", {}).get("points", 0)
    assert ruled_out > 0


def test_a_frontier_whose_other_points_are_all_ruled_out_keeps_its_first(monkeypatch):
    """Where a fitting alternative rules out every point (a bound above everything), the frontier
    keeps the first point in FT's order of time, simulated, and is not marked as stopped."""
    from stratagem.search import ft_search
    from stratagem.search.stopping import stopped
    ctx = context(zoo.build("mlp-tiny"), "cpu-1x2", 2)
    whole = frontier(ctx)
    monkeypatch.setattr(ft_search, "busy_bound", lambda model, strategy, resources=None: float("inf"))
    lean = frontier(ctx, least_time_under=float("inf"))
    assert len(list(lean)) == 1 and not stopped(lean)
    assert lean.details["ruled_out"]["points"] == len(list(whole)) - 1
    (first,) = lean
    assert first.additive_time_s == min(p.additive_time_s for p in whole)


def test_the_searches_after_nothing_fits_save_more_each_and_offload_activations_only_where_there_are_hosts():
    from stratagem.search.ft_search import FTSearchOptions
    from stratagem.search.modes import _memory_saving_tries
    graph = zoo.build("mlp-tiny")
    tries = _memory_saving_tries(context(graph, "a100-1x8", 2), FTSearchOptions())
    assert [(t.state_sharding, t.recompute, t.offload_activations, t.offload) for t in tries] == [
        (True, False, False, False), (True, True, False, False), (True, False, True, False), (True, True, False, True),
        (True, False, True, True)]
    asked = _memory_saving_tries(context(graph, "a100-1x8", 2), FTSearchOptions(recompute=True))
    assert [(t.state_sharding, t.recompute, t.offload_activations, t.offload) for t in asked] == [
        (True, True, False, False), (True, True, False, True)]
    hostless = _memory_saving_tries(context(graph, "cpu-1x2", 2), FTSearchOptions())
    assert [(t.recompute, t.offload_activations, t.offload) for t in hostless] == [(False, False, False), (True, False, False)]
    with pytest.raises(ConfigError, match="recomputes or offloads its activations, not both"):
        _ = FTSearchOptions(recompute=True, offload_activations=True).searched_space


def test_under_a_cap_only_offloaded_activations_meet_the_modes_return_such_a_plan():
    """gpt-tiny on 2 A100s under 126 MiB: no plan fits with every block recomputed (the leanest
    needs its blocks' inputs), one with blocks' activations offloaded does (the fewest leading
    ones, the others recomputed: search.selective)."""
    from stratagem.search.modes import least_time_ft
    graph = zoo.build("gpt-tiny")
    chosen = least_time_ft(context(graph, "a100-1x8", 2, memory_cap_bytes="126MiB"))
    assert chosen.offload_activations and chosen.peak_memory_bytes <= 126 * 2**20
    assert "selective_offload" in chosen.details
    assert chosen.details["host_memory"]["per_node_bytes"] > 0


@pytest.mark.parametrize("state_sharding", [False, True])
def test_alternatives_made_by_a_forked_worker_are_the_ones_made_here(state_sharding, monkeypatch):
    """The alternatives are priced in a forked worker while the search space is built
    (ft_search._alternatives_aside); with no worker this process makes them: the same plans."""
    graph = zoo.build("mlp-tiny")
    options = FTSearchOptions(state_sharding=state_sharding)
    monkeypatch.setenv(forked.WORKERS_ENV, "2")
    aside = frontier(context(graph, "cpu-1x2", 2), options).alternatives
    monkeypatch.setenv(forked.WORKERS_ENV, "1")
    here = frontier(context(graph, "cpu-1x2", 2), options).alternatives
    assert [p.algorithm for p in here] == (["data-parallel", "fsdp"] if state_sharding else ["data-parallel"])
    assert [(dict(p.strategy), p.iteration_time_s, p.peak_memory_bytes, p.details) for p in aside] == \
        [(dict(p.strategy), p.iteration_time_s, p.peak_memory_bytes, p.details) for p in here]
    assert all(p.graph is graph for p in [*aside, *here])


def test_busy_bounds_found_by_a_forked_worker_rule_out_what_this_process_rules_out(monkeypatch):
    """Under a cap, the points after the first are bounded in a forked worker while the first is
    simulated (ft_search._bounds_aside); with no worker this process bounds each: the same plans
    simulated, the same points ruled out."""
    graph = zoo.build("transformer-tiny")
    fronts = {}
    for workers in ("2", "1"):
        monkeypatch.setenv(forked.WORKERS_ENV, workers)
        ctx = context(graph, "a100-1x8", 8)
        fronts[workers] = frontier(ctx, least_time_under=ctx.memory_cap_bytes)
    aside, here = fronts["2"], fronts["1"]
    assert here.details["ruled_out"]["points"] > 0
    assert aside.details["ruled_out"] == here.details["ruled_out"]
    assert [(p.iteration_time_s, p.peak_memory_bytes, dict(p.strategy)) for p in aside] == \
        [(p.iteration_time_s, p.peak_memory_bytes, dict(p.strategy)) for p in here]
