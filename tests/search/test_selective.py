"""Selective recomputation and offload (search.selective): the fewest leading blocks recomputed, or
offloaded, that fit the cap, and the faster of the two, checked against trying every k and every
choice of blocks on real models."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from stratagem.cost.recompute import blocks
from stratagem.frontend import zoo
from stratagem.search import registry
from stratagem.search.context import context, recomputing
from stratagem.search.selective import fastest_saving, fewest_recomputed, least_fitting, simulated_peak_bytes
from stratagem.sim.builder import Simulation

CLUSTER, DEVICES = "a100-1x8", 2


@pytest.fixture(scope="module")
def gpt():
    """gpt-tiny's fsdp plan keeping every activation, and the simulated (peak, time) of every set
    of its four blocks recomputed."""
    ctx = context(zoo.build("gpt-tiny"), CLUSTER, DEVICES)
    plan = registry.run(ctx, "fsdp", {})
    names = [b.name for b in blocks(ctx.graph)]
    runs = {subset: Simulation(recomputing(ctx, subset).model, plan.strategy, representative=True).run()
            for k in range(len(names) + 1) for subset in itertools.combinations(names, k)}
    return ctx, plan, names, {s: (r.peak_memory_bytes, r.iteration_time_s) for s, r in runs.items()}


def test_recomputing_the_first_blocks_is_the_leanest_choice_of_as_many(gpt):
    ctx, plan, names, runs = gpt
    firsts = [runs[tuple(names[:k])] for k in range(len(names) + 1)]
    for k, (peak, _) in enumerate(firsts):
        assert peak == min(p for s, (p, _) in runs.items() if len(s) == k)
        assert peak == simulated_peak_bytes(ctx, plan, k)
    peaks, times = [p for p, _ in firsts], [t for _, t in firsts]
    assert all(a > b for a, b in zip(peaks, peaks[1:]))        # each block recomputed saves memory
    assert all(a < b for a, b in zip(times, times[1:]))        # and costs its forward again


def test_the_fewest_blocks_that_fit_the_cap_are_found(gpt):
    ctx, plan, names, runs = gpt
    peaks = [runs[tuple(names[:k])][0] for k in range(len(names) + 1)]
    for k in range(1, len(names) + 1):
        for cap in (peaks[k], (peaks[k] + peaks[k - 1]) / 2):
            capped = context(ctx.graph, CLUSTER, DEVICES, memory_cap_bytes=cap)
            found = fewest_recomputed(capped, plan)
            assert found.recompute == tuple(names[:k])
            assert found.peak_memory_bytes == peaks[k] <= cap
            assert found.iteration_time_s == runs[tuple(names[:k])][1]
            assert found.details["selective_recompute"]["blocks"] == k
    roomy = context(ctx.graph, CLUSTER, DEVICES, memory_cap_bytes=peaks[0])
    assert fewest_recomputed(roomy, plan) is plan
    tight = context(ctx.graph, CLUSTER, DEVICES, memory_cap_bytes=peaks[-1] - 1)
    assert fewest_recomputed(tight, plan) is None


def test_a_plan_recomputing_nothing_is_not_simulated_again_for_k_0(gpt, monkeypatch):
    """The plan is R_0's simulation: the search probes only other k (and finds what it did)."""
    ctx, plan, names, runs = gpt
    peaks = [runs[tuple(names[:k])][0] for k in range(len(names) + 1)]
    probed = []

    def counted(ctx, plan, k, saving):
        probed.append(k)
        return simulated_peak_bytes(ctx, plan, k, saving)

    monkeypatch.setattr("stratagem.search.selective.simulated_peak_bytes", counted)
    capped = context(ctx.graph, CLUSTER, DEVICES, memory_cap_bytes=peaks[2])
    found = fewest_recomputed(capped, plan)
    assert found.recompute == tuple(names[:2]) and probed and 0 not in probed


def test_blocks_unlike_one_another_still_get_the_fewest_leading_blocks_that_fit():
    """The Transformer's encoder and decoder layers differ: recomputing the first k is then not
    always the leanest choice of k blocks, but the k found is the least that fits."""
    ctx = context(zoo.build("transformer-tiny"), CLUSTER, DEVICES)
    plan = registry.run(ctx, "data-parallel", {})
    count = len(blocks(ctx.graph))
    peaks = [simulated_peak_bytes(ctx, plan, k) for k in range(count + 1)]
    for cap in sorted(set(peaks))[:-1]:
        capped = context(ctx.graph, CLUSTER, DEVICES, memory_cap_bytes=cap)
        found = fewest_recomputed(capped, plan)
        least = min(k for k in range(count + 1) if peaks[k] <= cap)
        assert len(found.recompute) == least and found.peak_memory_bytes <= cap


def test_least_fitting_finds_what_trying_every_k_finds():
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(2, 120)
        steps = [rng.choice((0.0, rng.random(), 1.0)) for _ in range(n)]
        peaks = [100.0 - sum(steps[:k]) for k in range(n + 1)]
        cap = rng.uniform(peaks[-1], peaks[0] - 1e-9)
        probed: list[int] = []

        def peak(k: int) -> float:
            probed.append(k)
            return peaks[k]
        expected = min(k for k in range(n + 1) if peaks[k] <= cap)
        assert least_fitting(peak, cap, 0, n) == expected
        assert len(set(probed) - {0, n}) <= 3 * math.ceil(math.log2(n)) + 1


def test_practitioners_plans_recompute_only_what_the_cap_needs(gpt):
    ctx, plan, names, runs = gpt
    peaks = [runs[tuple(names[:k])][0] for k in range(len(names) + 1)]
    capped = context(ctx.graph, CLUSTER, DEVICES, memory_cap_bytes=peaks[2])
    found = registry.run(capped, "fsdp", {"recompute_to_fit": True})
    assert found.recompute == tuple(names[:2]) and found.peak_memory_bytes == peaks[2]
    every = registry.run(capped, "fsdp", {"recompute": True})
    assert every.recompute == tuple(names) and found.iteration_time_s < every.iteration_time_s
    tight = context(ctx.graph, CLUSTER, DEVICES, memory_cap_bytes=peaks[-1] - 1)
    leanest = registry.run(tight, "fsdp", {"recompute_to_fit": True})
    assert leanest.recompute == tuple(names) and leanest.peak_memory_bytes > tight.memory_cap_bytes


@pytest.fixture(scope="module")
def choices(gpt):
    """The simulated (peak, time) of gpt-tiny's fsdp plan under every choice of keeping ("k"),
    recomputing ("r") or offloading ("o") each of its four blocks (81 choices)."""
    ctx, plan, names, _ = gpt
    found = {}
    for choice in itertools.product("kro", repeat=len(names)):
        picked = {c: tuple(n for n, d in zip(names, choice) if d == c) for c in "ro"}
        run = Simulation(ctx.model.with_activations(picked["r"], picked["o"]), plan.strategy,
                         representative=True).run()
        found["".join(choice)] = (run.peak_memory_bytes, run.iteration_time_s)
    return found


def test_offloading_the_first_blocks_is_the_leanest_choice_of_as_many_and_leaner_than_recomputing(gpt, choices):
    ctx, plan, names, recomputed = gpt
    offloads = {c: run for c, run in choices.items() if "r" not in c}
    firsts = [choices["o" * k + "k" * (len(names) - k)] for k in range(len(names) + 1)]
    for k, (peak, _) in enumerate(firsts):
        assert peak == min(p for c, (p, _) in offloads.items() if c.count("o") == k)
        assert peak == simulated_peak_bytes(ctx, plan, k, "offload")
        assert k == 0 or peak < recomputed[tuple(names[:k])][0]          # no block inputs kept
    peaks, times = [p for p, _ in firsts], [t for _, t in firsts]
    assert all(a > b for a, b in zip(peaks, peaks[1:]))
    assert all(a < b for a, b in zip(times, times[1:]))                  # copies out and back
    swaps = [choices["o" * k + "r" * (len(names) - k)][0] for k in range(len(names) + 1)]
    assert all(a >= b for a, b in zip(swaps, swaps[1:])) and swaps[0] > swaps[-1]
    assert swaps[0] == simulated_peak_bytes(ctx, plan, 0, "swap") == recomputed[tuple(names)][0]


def test_the_fastest_saving_is_the_fastest_of_every_choice_of_keep_recompute_offload_per_block(gpt, choices):
    """At every cap some choice meets (each distinct peak of the 81), `fastest_saving`'s plan is as
    fast as the fastest choice that fits, and fits; below the leanest, None. gpt-tiny's blocks are
    alike: the three families of leading blocks (recomputed, offloaded, offloaded with the others
    recomputed) hold the fastest choice at every cap."""
    ctx, plan, names, _ = gpt
    for cap in sorted({p for p, _ in choices.values()}):
        capped = context(ctx.graph, CLUSTER, DEVICES, memory_cap_bytes=cap)
        found = fastest_saving(capped, plan)
        # choices of equal time (the same blocks counted, other ones) sum their tasks in other orders:
        # at most ~1e4 terms differ by 1e4 * 2^-53 of the total
        assert found.iteration_time_s == pytest.approx(min(t for p, t in choices.values() if p <= cap), rel=1e-9)
        assert found.peak_memory_bytes <= cap
    mixed = [c for c, (p, _) in choices.items() if "o" in c and "r" in c
             and p < choices["r" * len(names)][0] and p <= cap]
    assert mixed                  # choices between every block recomputed and every block offloaded exist
    leanest = min(p for p, _ in choices.values())
    assert fastest_saving(context(ctx.graph, CLUSTER, DEVICES, memory_cap_bytes=leanest - 1), plan) is None


def test_between_every_block_recomputed_and_every_block_offloaded_the_fewest_swapped_are_chosen(gpt, choices):
    ctx, plan, names, _ = gpt
    n = len(names)
    swaps = [choices["o" * k + "r" * (n - k)] for k in range(n + 1)]
    k = next(k for k in range(1, n + 1) if swaps[k][0] < swaps[0][0])
    capped = context(ctx.graph, CLUSTER, DEVICES, memory_cap_bytes=swaps[k][0])
    found = fastest_saving(capped, plan)
    assert (found.offload_activations, found.recompute) == (tuple(names[:k]), tuple(names[k:]))
    assert found.details["selective_offload"] == {**found.details["selective_offload"], "blocks": k, "recomputed": n - k}
    assert found.iteration_time_s < choices["o" * n][1]        # every block offloaded fits too, slower
