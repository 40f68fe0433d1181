"""Frontier Tracking as the planner runs it: the (peak memory, iteration time) frontier of plans
(TensorOpt §3), and the `ft` search, its min-time end.

    search space   coarsened groups, each with its anchor's configurations (search.space)
    FT             search.ft over the space's cost problem, on peak memory (search.ft_peak: one pass
                   per threshold on the largest transient term); when hubs were fixed heuristically,
                   a second run fixes them as data parallel has them and the union's frontier is kept
    plans          every point unrolled to a strategy and simulated (context.make_plan); asked for
                   the least time under a memory cap only (`least_time_under`), the points in
                   order of FT's time, each simulated unless its busy bound (search.bounds) exceeds
                   the simulated time of a plan that fits: it could not be chosen
    alternatives   data parallel, simulated, when it lies in the space: FT picks by additive costs,
                   so the modes weigh it beside the frontier (priced before FT runs)
    progress       phases told to ctx.progress: cost tables, each FT pass's eliminations, the
                   points simulated; a Ctrl-C keeps what is done (search.stopping)
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from stratagem.collection import fewer_collections
from stratagem.forked import background
from stratagem.heap import release_freed_memory
from stratagem.errors import ConfigError
from stratagem.plan import Frontier, Plan
from stratagem.search.bounds import busy_bound, busy_resources
from stratagem.search.context import (
    PlanningContext, make_plan, offloading, plans_shared, recomputing, runnable_space, strategy_with_reuse,
)
from stratagem.search.ft import FTOptions, FTPoint, FTResult, Memo, merged
from stratagem.search.ft_bound import frontier_gap, lower_bound
from stratagem.search.ft_peak import peak_frontier_tracking
from stratagem.search.problem import CostProblem
from stratagem.search.progress import phase
from stratagem.search.space import FT_SPACE, SearchSpace, build_search_space
from stratagem.search.stopping import (
    BASELINE_KEPT, Interruption, fallback_plan, marked_frontier, stopped,
)
from stratagem.search.strategies import data_parallel_strategy, with_sharded_state
from stratagem.space import Configuration, SpaceOptions

# FT as the planner runs it: frontiers thinned to 16 tuples (both ends kept exactly), and nodes with
# edges across more than 24 groups fixed first (TensorOpt's heuristic elimination, for tied
# embeddings and encoder outputs), and at most 4 passes over peak thresholds (search.ft_peak: the
# top pass and three below the largest transient levels; the Transformer at 16 has 16 or more).
# FTOptions() is exact; the frontier records which it used.
PLANNER_FT = FTOptions(max_width=16, hub_span=24, peak_passes=4)

# A busy bound and a simulated time add the same durations in other orders: two sums of at most
# n <= 4.5 M terms differ by at most 2 n 2^-53 < 1e-9 of their size. A point is ruled out only
# past that.
ROUNDING = 1e-9


@dataclass(frozen=True)
class FTSearchOptions:
    space: SpaceOptions = field(default=FT_SPACE, metadata={"help": "the configurations each op may take"})
    ft: FTOptions = field(default=PLANNER_FT, metadata={"help": "frontier tracking's limits (FTOptions() is exact)"})
    runnable: bool = field(default=True, metadata={"help": "keep to what stratagem.runtime executes "
                                                           "(False: the papers' whole space)"})
    state_sharding: bool = field(default=False, metadata={
        "help": "also choose, per weight owner, to hold its weights, gradients and optimizer state sharded "
                "over its data-parallel axes (ZeRO-3 / FSDP); the modes turn it on when no plan fits without"})
    recompute: bool = field(default=False, metadata={
        "help": "recompute every repeated block (module-list element) in backward: full activation "
                "checkpointing; the modes turn it on when no plan fits without"})
    offload_activations: bool = field(default=False, metadata={
        "help": "every repeated block sends the activations it keeps for backward to host memory and back "
                "(cost.activation_offload; not with recompute); the modes turn it on when no plan fits with "
                "every block recomputed, where the cluster has hosts"})
    offload: bool = field(default=False, metadata={
        "help": "with state_sharding, also choose to keep a weight owner's shards in host memory, the optimizer "
                "stepping on the host CPU (FSDP2's CPUOffloadPolicy); the modes turn it on when no plan fits "
                "with sharding and recomputation"})
    scatter: bool = field(default=False, metadata={
        "help": "also offer, where an elementwise op follows a partial sum, the op split with the sum "
                "reduce-scattered (sequence parallelism) beside it replicated with the sum all-reduced: "
                "a better frontier (the Transformer at v100-2x8 6.5 % faster), at about twice FT's time on LLMs"})
    pipeline: str = field(default="auto", metadata={
        "help": "the modes also weigh plans with pipeline stages (search.pipeline): yes | no | auto (when "
                "the devices span more than one node and the model is from the zoo)"})
    bound: bool = field(default=False, metadata={
        "help": "also find a certified lower bound on the frontier (search.ft_bound: FT's heuristics relaxed; "
                "often many times FT's own time) and FT's largest time gap to it, in details['lower_bound']"})

    @property
    def searched_space(self) -> SpaceOptions:
        if self.recompute and self.offload_activations:
            raise ConfigError("a block recomputes or offloads its activations, not both",
                              expected="at most one of recompute=true and offload_activations=true",
                              got="both", hint="Drop one of the two options")
        space = runnable_space(self.space, self.runnable)
        if self.offload and not self.state_sharding:
            raise ConfigError("offload is a choice of the sharded weight states",
                              expected="state_sharding=true with offload=true", got="state_sharding=false",
                              hint="Add --option state_sharding=true")
        space = replace(space, scatter_partial_sums=self.scatter)
        return replace(space, state_sharding=True, offload=self.offload) if self.state_sharding else space


def frontier(ctx: PlanningContext, options: FTSearchOptions = FTSearchOptions(),
             least_time_under: float | None = None) -> Frontier:
    """The (peak memory, iteration time) frontier by Frontier Tracking (TensorOpt §3). Stopped by
    Ctrl-C (search.stopping): the points of the passes done, as many as were simulated; before FT
    has any, the alternatives it priced first (data parallel). `least_time_under` (a memory cap
    in bytes): only what choosing the least simulated time under it needs, the points that could
    be that plan (the others are left out, and the frontier's details count them)."""
    with fewer_collections():
        return _frontier(ctx, options, least_time_under)


def _frontier(ctx: PlanningContext, options: FTSearchOptions, least_time_under: float | None) -> Frontier:
    if options.recompute and not ctx.model.recompute:
        ctx = recomputing(ctx)
    if options.offload_activations and not ctx.model.offload_activations:
        ctx = offloading(ctx)
    try:
        strategies = _alternative_strategies(ctx, options)
        with _alternatives_aside(ctx, strategies) as made_aside:
            search_space = build_search_space(ctx.model, options.searched_space, progress=ctx.progress)
            alternatives = _priced_alternatives(ctx, search_space, strategies, made_aside())
    except KeyboardInterrupt:
        return _fallback(ctx, [], "building the cost tables")
    try:
        result = _tracked(ctx, search_space, options.ft)
    except KeyboardInterrupt:
        return _fallback(ctx, alternatives, "FT's first pass (eliminations)")
    release_freed_memory()          # FT's tables, dropped: not under the simulations that follow
    fixes = [{"op": search_space.groups[f.node].anchor, "config": _fixed_config(search_space, f),
              "reason": f.reason} for f in result.heuristic_fixes]
    plans, simulation_stopped, ruled_out = _simulated(ctx, search_space, result, fixes, least_time_under,
                                                      alternatives)
    if not plans:
        return _fallback(ctx, alternatives, "simulating frontier points")
    stats = dict(result.stats, groups=len(search_space.groups),
                 configs_per_group=max(len(c) for c in search_space.configs),
                 exact=bool(result.stats.get("exact")) and not fixes, max_width=options.ft.max_width,
                 hub_span=options.ft.hub_span, peak_passes=options.ft.peak_passes)
    details = {"algorithm": "ft", "stats": stats, "heuristic_fixes": fixes}
    if options.bound:
        try:
            details["lower_bound"] = bound_details(search_space.problem, result)
        except KeyboardInterrupt:
            details["lower_bound"] = {"stopped": "Ctrl-C while finding the lower bound"}
    if ruled_out:
        details["ruled_out"] = {"points": ruled_out, "memory_cap_bytes": least_time_under,
                                "why": "not simulated: busy bound above the simulated time of a plan that fits"}
    front = Frontier(plans, details, alternatives)
    also = ", and data parallel" if alternatives else ""
    if simulation_stopped:
        return marked_frontier(front, Interruption("simulating frontier points", f"the {len(plans)} of "
                                                   f"{len(result.points)} frontier points simulated{also}"))
    if result.stats.get("interrupted"):
        return marked_frontier(front, Interruption(f"{result.stats['interrupted']} (eliminations)",
                                                   f"the frontier of the passes done ({len(plans)} points){also}"))
    return front


def _tracked(ctx: PlanningContext, search_space: SearchSpace, ft_options: FTOptions) -> FTResult:
    """FT on peak memory (search.ft_peak). When hubs were fixed heuristically, a second run fixes
    them as data parallel has them (its top pass) and the union's frontier is kept; a Ctrl-C
    during it keeps the first run's."""
    memo = Memo()
    result = peak_frontier_tracking(search_space.problem, ft_options, progress=ctx.progress, memo=memo)
    if not result.heuristic_fixes or result.stats.get("interrupted"):
        return result
    baseline = search_space.index_of(ctx.model, data_parallel_strategy(ctx))
    if baseline is None:
        return result
    label = "FT, hubs as data parallel has them,"
    try:
        second = peak_frontier_tracking(search_space.problem, replace(ft_options, peak_passes=1), prefer=baseline,
                                        progress=ctx.progress, label=label, memo=memo)
    except KeyboardInterrupt:
        return replace(result, stats=dict(result.stats, interrupted=f"{label} pass 1"))
    return merged(result, second)


def bound_details(problem: CostProblem, result: FTResult) -> dict:
    """FT's points against a certified lower bound on the problem's frontier (search.ft_bound),
    both in FT's own terms (the cost problem's peak memory and time)."""
    bound = lower_bound(problem, against=result.pairs)
    gap = frontier_gap(result.pairs, list(bound.pairs))
    return dict(gap.as_dict(), bound_points=len(bound.pairs), passes=bound.passes, nodes_split=bound.splits,
                seconds=bound.seconds)


def _simulated(ctx: PlanningContext, search_space: SearchSpace, result: FTResult, fixes: list,
               least_time_under: float | None = None, alternatives: Sequence[Plan] = ()
               ) -> tuple[list[Plan], bool, int]:
    """The points unrolled to strategies and simulated: (the plans, whether a Ctrl-C stopped it,
    how many were ruled out). With `least_time_under`, in order of FT's time, a point whose busy
    bound exceeds the simulated time of a plan that fits the cap (an alternative, the first
    point, or a point simulated before it in this process or, in the planner's, in any) is left
    out: its simulated time would exceed that plan's, so it could not be the least time under the
    cap. The first point is always simulated, so that the frontier has one even where an
    alternative wins; meanwhile a forked worker finds the other points' busy bounds
    (`_bounds_aside`), and those the first point's time already rules out are not handed on."""
    details = {"heuristic_fixes": fixes} if fixes else None
    order = sorted(range(len(result.points)), key=lambda i: result.points[i].time) \
        if least_time_under is not None else list(range(len(result.points)))
    points = [result.points[i] for i in order]
    # the fastest fitting time known to this process: its own plans (`simulated`, in a worker
    # too) and, in the planner's, every plan as it arrives (`arrived`)
    fastest = [min((p.iteration_time_s for p in alternatives if _fits(p, least_time_under)), default=math.inf)]
    resources = busy_resources(ctx.model) if least_time_under is not None else None

    def simulated(item: tuple[FTPoint, float | None]) -> Plan | None:
        point, bound = item
        strategy, reuse = search_space.strategy(point.assignment, point.options)
        if least_time_under is not None and point is not points[0] and _ruled_out(
                bound if bound is not None else _bound(ctx, (strategy, reuse), resources), fastest[0]):
            return None                                 # (the first is kept: a frontier has a point)
        plan = make_plan(ctx, strategy, "ft", reuse, details)
        if _fits(plan, least_time_under):
            fastest[0] = min(fastest[0], plan.iteration_time_s)
        return plan

    done: dict[int, Plan | None] = {}

    def arrived(i: int, plan: Plan | None) -> None:
        done[i] = plan
        if plan is not None and _fits(plan, least_time_under):
            fastest[0] = min(fastest[0], plan.iteration_time_s)
        ctx.progress.advance()

    items = [(point, None) for point in points]
    with phase(ctx.progress, "simulating frontier points", len(points)):
        try:
            if least_time_under is not None and points:
                with _bounds_aside(ctx, search_space, points[1:], resources) as bounds:
                    arrived(0, simulated(items[0]))
                    known = bounds()
                if known is not None:
                    items[1:] = [(point, bound) for point, bound in zip(points[1:], known)]
                for i, (_, bound) in enumerate(items):
                    if i and bound is not None and _ruled_out(bound, fastest[0]):
                        arrived(i, None)
            left = [i for i in range(len(points)) if i not in done]
            plans_shared(ctx, simulated, [items[i] for i in left], lambda j, plan: arrived(left[j], plan))
            stopped = False
        except KeyboardInterrupt:
            stopped = True
    found = [done.get(i) for i in range(len(points))]
    in_order = sorted(range(len(points)), key=lambda k: order[k])        # FT's order of its points
    plans = [found[k] for k in in_order if found[k] is not None]
    return plans, stopped, 0 if stopped else len(found) - len(plans)


def _bound(ctx: PlanningContext, unrolled: tuple, resources) -> float:
    """The busy bound of an unrolled point (search_space.strategy's strategy and reuse choices)."""
    return busy_bound(ctx.model, strategy_with_reuse(ctx, *unrolled), resources)


def _ruled_out(bound_s: float, fastest_s: float) -> bool:
    """Whether a point whose busy bound is `bound_s` could not beat a fitting plan of `fastest_s`."""
    return bound_s > fastest_s * (1 + ROUNDING)


@contextlib.contextmanager
def _bounds_aside(ctx: PlanningContext, search_space: SearchSpace, points: Sequence[FTPoint], resources):
    """The busy bounds of `points`, found by a forked worker (stratagem.forked.background) from the
    first on while this process simulates the first point, then by this process too, from the last
    back, until the two meet. Yields a function that returns them in order (None where there are
    none to find or no worker was started: `simulated` finds each itself; where the worker fails,
    this process finds what it did not send). `resources`: busy_resources(ctx.model)."""
    if not points:
        yield lambda: None
        return

    def bound(point: FTPoint) -> float:
        return _bound(ctx, search_space.strategy(point.assignment, point.options), resources)

    def send_bounds(send) -> None:
        for i, point in enumerate(points):
            send((i, bound(point)))

    with background(send_bounds) as job:
        if job is None:
            yield lambda: None
            return

        def met() -> list[float]:
            known: dict[int, float] = {}
            for i in reversed(range(len(points))):
                known.update(job.take(wait=False))       # in order: with i, every point before it
                if i in known:
                    break
                known[i] = bound(points[i])
            return [known[i] for i in range(len(points))]
        yield met


def _fits(plan: Plan, memory_cap_bytes: float | None) -> bool:
    return memory_cap_bytes is not None and plan.peak_memory_bytes <= memory_cap_bytes


def _alternative_strategies(ctx: PlanningContext, options: FTSearchOptions) -> list[dict[str, Configuration]]:
    """Data parallel, and FSDP (its weights' states sharded, or offloaded) where the space has them."""
    data_parallel = data_parallel_strategy(ctx)
    space = options.searched_space
    return [data_parallel] + ([with_sharded_state(ctx, data_parallel)] if space.state_sharding else []) \
        + ([with_sharded_state(ctx, data_parallel, "offloaded")] if space.offload else [])


@contextlib.contextmanager
def _alternatives_aside(ctx: PlanningContext, strategies: list[dict[str, Configuration]]):
    """The alternatives' plans made in a forked worker (stratagem.forked.background) while this
    process builds the search space, which they need nothing of. Yields a function that returns
    them, in order, each without its graph (None where no worker was started or it failed: the
    caller makes them)."""
    def send_plans(send) -> None:
        send([replace(_alternative_plan(ctx, strategy), graph=None) for strategy in strategies])

    with background(send_plans) as job:
        yield (lambda: None) if job is None else (lambda: next(job.messages(), None))


def _priced_alternatives(ctx: PlanningContext, search_space: SearchSpace, strategies: list[dict[str, Configuration]],
                         made: list[Plan] | None = None) -> list[Plan]:
    """The plans of the alternative strategies in the searched space, simulated (`made`: all
    of them made already, without their graphs): priced before FT runs, so that a Ctrl-C during
    it has a plan to keep. FT picks by additive (Eq. 3) costs, which add communication to compute
    where the simulator overlaps them, so its min-time end can be slower than data parallel once
    simulated."""
    member = {op: set(configs) for group_members in search_space.members
              for op, configs in group_members.items()}
    in_space = [all(strategy[op] in member.get(op, ()) for op in strategy) for strategy in strategies]
    if made is None:
        return [_alternative_plan(ctx, s) for s, inside in zip(strategies, in_space) if inside]
    return [replace(plan, graph=ctx.graph) for plan, inside in zip(made, in_space) if inside]


def _alternative_plan(ctx: PlanningContext, strategy: Mapping[str, Configuration]) -> Plan:
    sharded = any(config.sharded_state for config in strategy.values())
    return make_plan(ctx, strategy, "fsdp" if sharded else "data-parallel")


def _fallback(ctx: PlanningContext, alternatives: list[Plan], phase_name: str) -> Frontier:
    """A frontier stopped before it had a point: the alternatives priced (else data parallel, now)."""
    plans = alternatives or [fallback_plan(ctx, phase_name)]
    return marked_frontier(Frontier(plans, {"algorithm": "ft", "stats": {}}), Interruption(phase_name, BASELINE_KEPT))


def _fixed_config(search_space: SearchSpace, fix) -> str:
    """The configuration a heuristic elimination fixed, as text. A node that branch elimination
    merged with another indexes the product of both nodes' configurations: that index is given."""
    g = fix.node
    if fix.config < len(search_space.configs[g]) * search_space.num_flags(g):
        return str(search_space.config(g, fix.config))
    return f"configuration {fix.config} of the node merged from group {g} and others"


def ft(ctx: PlanningContext, options: FTSearchOptions = FTSearchOptions()) -> Plan:
    """The frontier's point of least simulated time (stopped before FT had one: data parallel, so named)."""
    front = frontier(ctx, options)
    return front.min_time if stopped(front) else replace(front.min_time, algorithm="ft")


