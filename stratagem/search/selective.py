"""Selective recomputation: recompute only as many of a model's repeated blocks as the memory cap
needs (issue 20; Chen et al. 2016's checkpoints chosen under a budget, Megatron-LM's "block" method
that recomputes the first k layers, torchtitan's per-layer activation checkpointing).

A strategy S over the repeated blocks B_1..B_N (program order, cost.recompute.blocks), with the
first k of them recomputed, R_k = {B_1..B_k}. With a_j the activations B_j keeps for backward, i_j
what it keeps when recomputed (its inputs) and c the rest of the peak (weights, gradients, state,
what lies outside the blocks):

    peak(R_k) = c + max( sum_{j<=k} i_j + sum_{j>k} a_j ,            backward's start: kept blocks
                         max_{j<=k} sum_{l<j} i_l + a_j )            backward recomputing B_j

For blocks alike (a_j = a >= i_j = i) both terms fall or stay as k grows, so peak(R_k) is
non-increasing in k, and R_k holds the least of any k blocks: every block before a recomputed one
is recomputed too, so a recomputation meets no kept activations of earlier blocks. Time grows with
k (each recomputed block runs its forward again). So the least time under a cap with recomputation
of whole blocks is at the least k that fits:

    fewest(S, cap) = R_k, k = min { k in [0, N] : simulated peak(S, R_k) <= cap }

found by probing k where the line through the two ends (both simulated first) crosses the cap, and
its neighbour, then the middle (4 simulations on the zoo's decoders, at most about 3 log2 N), or
None when even R_N does not fit. `tests/search/test_selective.py` checks on real models that the
simulated peak is non-increasing in k, that R_k is the leanest choice of k blocks, and that the
search finds the k that trying every k finds.

Offloading the first k blocks' activations instead (O_k, cost.activation_offload) holds nothing of
theirs between forward and backward, and each again while backward runs through it:

    peak(O_k) = c + max( sum_{j>k} a_j ,  max_{j<=k} a_j )

non-increasing in k as well, leaner than R_k (no inputs kept), and slower by the copies to the host
and back where they do not hide behind compute. Where even R_N does not fit, offloading the first k
of the recomputed blocks instead (S_k = O_k + R_{k+1..N}) gives back their inputs one block at a
time, peak(S_k) non-increasing from peak(R_N) to peak(O_N); for blocks alike its time is linear in
k, so the least fitting k is its fastest where a copy costs more than a recomputation, and O_N's
family is faster where it costs less. `fastest_saving` takes the fastest of the fewest recomputed,
the fewest offloaded and the fewest swapped blocks that fit, each simulated.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from stratagem.cost.recompute import blocks
from stratagem.plan import Plan
from stratagem.search.context import PlanningContext, labels_of, make_plan
from stratagem.sim.builder import Simulation


# what the first k blocks do with their activations: recompute or offload them (the others keep
# theirs), or offload them while every other block recomputes ("swap")
SAVINGS = ("recompute", "offload", "swap")


def first_blocks(ctx: PlanningContext, k: int) -> tuple[str, ...]:
    """The names of the graph's first k repeated blocks (program order)."""
    return tuple(b.name for b in blocks(ctx.graph)[:k])


def with_first(ctx: PlanningContext, k: int, saving: str = "recompute") -> PlanningContext:
    """The same planning with the first k blocks recomputed (`saving` "recompute") or offloading
    their activations to host memory ("offload"), the others keeping theirs; or ("swap") the first
    k offloading theirs and every other block recomputed."""
    names = first_blocks(ctx, k)
    if saving == "recompute":
        chosen = (names, ())
    elif saving == "offload":
        chosen = ((), names)
    else:
        chosen = (tuple(b.name for b in blocks(ctx.graph)[k:]), names)
    return replace(ctx, model=ctx.model.with_activations(*chosen))


def with_first_recomputed(ctx: PlanningContext, plan: Plan, k: int, saving: str = "recompute") -> Plan:
    """`plan`'s strategy with the first k blocks recomputed (or offloaded: `saving`) and the others
    keeping their activations (whatever the plan did with them before), simulated."""
    return make_plan(with_first(ctx, k, saving), plan.strategy, plan.algorithm, details=labels_of(plan))


def fewest_recomputed(ctx: PlanningContext, plan: Plan, saving: str = "recompute") -> Plan | None:
    """`plan`'s strategy with the fewest leading blocks recomputed (or offloaded: `saving`) that fit
    ctx's memory cap (the plan itself when it fits keeping every activation, as it is when it
    saves none); None when it does not fit even with every block saved, or has no repeated blocks."""
    if plan.strategy.pipeline is not None:
        raise ValueError("fewest_recomputed chooses blocks for plans without stages; "
                         "search.pipeline recomputes the stages over the cap")
    count, cap = len(blocks(ctx.graph)), ctx.memory_cap_bytes
    keeps_all = not plan.recompute and not plan.offload_activations
    if keeps_all and plan.peak_memory_bytes <= cap:
        return plan
    known = {0: plan.peak_memory_bytes} if keeps_all and saving != "swap" else {}   # the plan is R_0's simulation

    def peak(k: int) -> float:
        if k not in known:
            known[k] = simulated_peak_bytes(ctx, plan, k, saving)
        return known[k]

    if peak(0) <= cap:      # a swap of none is every block recomputed: the recomputations' search finds fewer
        return None if saving == "swap" else with_first_recomputed(ctx, plan, 0)
    if count == 0 or peak(count) > cap:
        return None
    k = least_fitting(peak, cap, 0, count)
    return _said(with_first_recomputed(ctx, plan, k, saving), k, count, saving)


def fastest_saving(ctx: PlanningContext, plan: Plan) -> Plan | None:
    """`plan`'s strategy with the fewest leading blocks recomputed that fit, with the fewest
    leading blocks offloaded that fit, or, where even every block recomputed does not fit, with
    the fewest leading blocks offloaded and the others recomputed that fit (the last two where
    the cluster has hosts to offload to), whichever is fastest simulated; None when none fits."""
    savings = SAVINGS if ctx.model.cluster.spec.host is not None else SAVINGS[:1]
    found = [p for p in (fewest_recomputed(ctx, plan, saving) for saving in savings) if p is not None]
    return min(found, key=lambda p: (p.iteration_time_s, p.peak_memory_bytes), default=None)


def recomputed_to_fit(ctx: PlanningContext, plan: Plan) -> Plan:
    """fewest_recomputed, or where nothing fits the plan with every block recomputed (the
    leanest it can be)."""
    found = fewest_recomputed(ctx, plan)
    return found if found is not None else with_first_recomputed(ctx, plan, len(blocks(ctx.graph)))


def simulated_peak_bytes(ctx: PlanningContext, plan: Plan, k: int, saving: str = "recompute") -> float:
    """The simulated peak memory of `plan`'s strategy with the first k blocks recomputed (or
    offloaded: `saving`; what make_plan's plan would say, without pricing the rest of its report)."""
    model = with_first(ctx, k, saving).model
    return Simulation(model, plan.strategy, representative=True).run().peak_memory_bytes


def least_fitting(peak: Callable[[int], float], cap: float, low: int, high: int) -> int:
    """The least k in (low, high] with peak(k) <= cap, for a non-increasing peak with
    peak(low) > cap >= peak(high). Each round probes where the line through the two ends crosses
    the cap and its neighbour on the other side (which ends the search where the peak falls by the
    same bytes per block), then, if still open, the middle: at most about 3 log2(high - low)
    probes."""
    while high - low > 1:
        over, under = peak(low) - cap, cap - peak(high)
        guess = min(max(low + math.ceil((high - low) * over / (over + under)), low + 1), high - 1)
        low, high = _narrowed(peak, cap, low, high, guess)
        if high - low > 1:
            low, high = _narrowed(peak, cap, low, high, guess + (1 if high > guess else -1))
        if high - low > 1:
            low, high = _narrowed(peak, cap, low, high, (low + high) // 2)
    return high


def _narrowed(peak: Callable[[int], float], cap: float, low: int, high: int, k: int) -> tuple[int, int]:
    if not low < k < high:
        return low, high
    return (low, k) if peak(k) <= cap else (k, high)


def _said(plan: Plan, k: int, count: int, saving: str = "recompute") -> Plan:
    """The plan, its details saying how many blocks it recomputes (or offloads) and why."""
    if saving == "recompute":
        note = (f"the first {k} of {count} blocks recomputed: the fewest with which the plan fits the memory cap "
                "(the first blocks: their recomputation meets no kept activations of earlier blocks)")
        return replace(plan, details={**plan.details, "selective_recompute": {"blocks": k, "of": count, "note": note}})
    rest = count - k if saving == "swap" else 0
    others = f", the other {rest} recomputed" if rest else ""
    note = (f"the first {k} of {count} blocks' activations offloaded to host memory{others}: the fewest with which "
            "the plan fits the memory cap (the first blocks: their activations wait longest for backward)")
    said = {"blocks": k, "of": count, "recomputed": rest, "note": note}
    return replace(plan, details={**plan.details, "selective_offload": said})
