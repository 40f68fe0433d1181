"""The modes of TensorOpt §4.1, for any search: which plan a user gets.

    plan_at(ctx, algorithm, options)   one device count: FT's frontier (and its alternatives, and
                                       plans with pipeline stages across nodes) cut at the memory
                                       cap, least time; when nothing fits, the practitioners' plans
                                       (fsdp, fsdp-tp) recomputing the fewest blocks that fit, then FT
                                       again with weights held sharded as a choice (`state_sharding`),
                                       then with every block recomputed (`recompute`), then, where
                                       the cluster file has a host section, with every block's
                                       activations offloaded instead (`offload_activations`), its plan
                                       then recomputing or offloading only the fewest leading blocks
                                       that fit, the faster (search.selective), then with shards
                                       offloaded to host memory as a choice (`offload`; every block
                                       recomputed, then every block offloaded); any other search
                                       its plan.
                                       Returns (plan, fits): the leanest plan when nothing fits.
    mini_time          least time under the cap on the devices given
    mini_parallelism   the fewest devices that fit (device counts from `device_counts`, ascending)
    profiling          {device count: (plan, fits)}

Modes choose by the simulated time and peak memory, which are what a plan will do; the additive
(Eq. 3) costs stay on each plan beside them. To choose the least time under the cap, FT's points
that provably cannot be it are not simulated (ft_search: a busy bound above a fitting plan's
time). A search stopped by Ctrl-C (search.stopping) runs no further: each mode chooses among the
plans found so far, and the plan it returns says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from typing import Any

from stratagem.cluster import Cluster
from stratagem.cost.recompute import blocks
from stratagem.plan import Frontier, Plan
from stratagem.search import registry
from stratagem.search.beside import Beside, beside
from stratagem.errors import ConfigError, StratagemError
from stratagem.search.context import NothingFits, PlanningContext, fits_host, least_time, plans_shared
from stratagem.search.ft_search import FTSearchOptions, frontier
from stratagem.search.pipeline import in_zoo, pipeline_plans
from stratagem.search.selective import fastest_saving
from stratagem.search.stopping import Interruption, interruption, marked, marked_frontier, stopped

MODES = ("mini_time", "mini_parallelism", "profiling")


def mini_time(front: Frontier, memory_cap_bytes: float) -> Plan:
    """The least simulated time under the cap over a frontier and its alternatives (data parallel,
    simulated: a plan chosen is never slower than the simplest one); NothingFits when none fits."""
    return least_time([*front, *front.alternatives], memory_cap_bytes)


def plan_at(ctx: PlanningContext, algorithm: str = "ft", options: Any = None) -> tuple[Plan, bool]:
    """The least-time plan of `algorithm` on the context's devices, and whether it fits the cap."""
    if algorithm == "ft":
        try:
            return least_time_ft(ctx, options), True
        except NothingFits as refusal:
            return refusal.leanest, False
    plan = registry.run(ctx, algorithm, options)
    return plan, plan.peak_memory_bytes <= ctx.memory_cap_bytes and fits_host(plan)


def least_time_ft(ctx: PlanningContext, options: Any = None) -> Plan:
    """mini_time over FT's frontier. When nothing on it fits: the practitioners' plans with
    weights held sharded (`fsdp`, `fsdp-tp`, each recomputing the fewest blocks that fit), the
    faster that fits, said in its details (FT over the larger space is slower: it is searched only
    when asked, or when these do not fit either); then FT's frontier with weights held sharded as
    a choice, then also with every block recomputed (each unless it already was), then with every
    block's activations offloaded instead (where the cluster has a host section), its plan then
    recomputing or offloading only the fewest leading blocks that fit, then also with shards
    offloaded to host memory as a choice (where the cluster has a host section; every block
    recomputed, then every block offloaded). NothingFits carries the leanest
    plan seen (`leanest`). Stopped by Ctrl-C (search.stopping), no further search runs: the
    plan chosen from what was found, or NothingFits with the leanest plan, marked."""
    chosen = registry.make_options("ft", options)
    with beside(ctx, _tasks(chosen.pipeline), _worker_tasks(ctx, chosen.pipeline), yielding=("practitioners",)) as side:
        front = _frontier_and_stages(ctx, side, chosen, least_time_under=ctx.memory_cap_bytes)
        try:
            best = mini_time(front, ctx.memory_cap_bytes)
        except NothingFits as refusal:
            refusal.leanest, failed = front.min_memory, refusal
        else:
            return best if stopped(front) else _not_slower_than_practitioners(ctx, best, side)
        if stopped(front):
            raise failed
        try:
            return _saving_memory(ctx, chosen, failed, side)
        except KeyboardInterrupt:
            failed.leanest = marked(failed.leanest, Interruption("the searches for plans that need less memory",
                                                                 "the leanest plan found so far (none fits the cap)"))
            raise failed from None


def _saving_memory(ctx: PlanningContext, chosen: Any, failed: NothingFits, side: Beside) -> Plan:
    """least_time_ft's searches after FT's frontier had no plan under the cap."""
    if not (chosen.state_sharding or chosen.recompute):
        found = _practitioners_fitting(ctx, side.result("practitioners"))
        if found is not None:
            return found
    for options_tried in _memory_saving_tries(ctx, chosen):
        front = frontier(ctx, options_tried, least_time_under=ctx.memory_cap_bytes)
        try:
            best = mini_time(front, ctx.memory_cap_bytes)
        except NothingFits as refusal:
            refusal.leanest, failed = _leanest(front, failed.leanest), refusal
        else:
            saving = options_tried.recompute or options_tried.offload_activations
            return _fewer_saved(ctx, best) if saving and not stopped(front) else best
        if stopped(front):
            break
    raise failed


def _memory_saving_tries(ctx: PlanningContext, chosen: Any) -> list[Any]:
    """FT's options for each search after none fitted, each saving more than the one before:
    weights held sharded as a choice; also every block recomputed; where the cluster has hosts,
    every block's activations offloaded instead; then shards offloaded to host memory as a choice
    too, with every block recomputed, and last with every block's activations offloaded."""
    hosts = ctx.model.cluster.spec.host is not None
    tries = []
    if not chosen.state_sharding:
        tries.append(replace(chosen, state_sharding=True))
    base = tries[-1] if tries else chosen
    saving = not (chosen.recompute or chosen.offload_activations)
    if saving:
        tries.append(replace(base, recompute=True))
        if hosts:
            tries.append(replace(base, offload_activations=True))
    if not chosen.offload and hosts:
        offloaded = replace(base, offload=True, state_sharding=True)
        tries += [replace(offloaded, recompute=True), replace(offloaded, offload_activations=True)] if saving \
            else [offloaded]
    return tries


def _fewer_saved(ctx: PlanningContext, plan: Plan) -> Plan:
    """FT's plan found with every block recomputed (or offloaded), recomputing or offloading only
    the fewest leading blocks with which it still fits, whichever is faster (search.selective): the
    same strategy, faster."""
    try:
        return fastest_saving(ctx, plan) or plan
    except KeyboardInterrupt:
        every = "every block recomputed" if plan.recompute else "every block's activations offloaded"
        return marked(plan, Interruption("choosing the fewest blocks to recompute or offload", every))


def _leanest(front: Frontier, before: Plan) -> Plan:
    """The frontier's leanest plan; of one stopped by Ctrl-C, the leaner of it and `before`, marked."""
    record = interruption(front.details)
    if record is None:
        return front.min_memory
    return marked(min(front.min_memory, before, key=lambda p: p.peak_memory_bytes), record)


PIPELINE_CHOICES = ("auto", "yes", "no")


def weighs_stages(ctx: PlanningContext, choice: str = "auto") -> bool:
    """Whether the modes weigh plans with stages: with "yes", or with "auto" when the devices span
    more than one node (where links between nodes are slower) and the model is from the zoo (the
    micro-batch's graph is built again)."""
    if choice not in PIPELINE_CHOICES:
        raise ConfigError("pipeline choice is not valid", expected=" | ".join(PIPELINE_CHOICES), got=repr(choice))
    return choice == "yes" or (choice == "auto" and ctx.num_devices > ctx.cluster.spec.devices_per_node
                               and in_zoo(ctx.zoo_name or ctx.graph.name))


def staged_plans(ctx: PlanningContext, choice: str = "auto") -> list[Plan]:
    """The pipeline search's plans (search.pipeline) the modes weigh (`weighs_stages`); none where
    the graph has no stages."""
    if not weighs_stages(ctx, choice):
        return []
    try:
        return pipeline_plans(ctx)
    except StratagemError:
        if choice == "yes":
            raise
        return []


def frontier_and_stages(ctx: PlanningContext, options: Any = None, choice: str = "auto",
                        least_time_under: float | None = None) -> Frontier:
    """frontier_with_stages(ctx, frontier(ctx, options, least_time_under), choice), the pipeline
    search (which does not need FT's frontier) run meanwhile in a forked worker where there is a
    second CPU (search.beside; its progress is shown once FT is done)."""
    with beside(ctx, _tasks(choice), ("staged",) if weighs_stages(ctx, choice) else ()) as side:
        return _frontier_and_stages(ctx, side, options, least_time_under)


def _tasks(choice: str) -> dict[str, Any]:
    """What least_time_ft may need beside FT's frontier (search.beside): the plans with stages
    and the practitioners' plans, priced."""
    return {"staged": partial(staged_plans, choice=choice), "practitioners": _practitioners_plans}


def _worker_tasks(ctx: PlanningContext, choice: str) -> tuple[str, ...]:
    """The tasks a worker runs while FT searches: the pipeline search where plans with stages are
    weighed; the practitioners' plans for a graph of repeated blocks (least_time_ft weighs them
    whatever FT finds)."""
    return (("staged",) if weighs_stages(ctx, choice) else ()) + (("practitioners",) if blocks(ctx.graph) else ())


def _frontier_and_stages(ctx: PlanningContext, side: Beside, options: Any = None,
                         least_time_under: float | None = None) -> Frontier:
    front = frontier(ctx, options if options is not None else FTSearchOptions(), least_time_under)
    return frontier_with_stages(ctx, front, staged_by=partial(side.result, "staged"))


def frontier_with_stages(ctx: PlanningContext, front: Frontier, choice: str = "auto",
                         staged_by: Callable[[], list[Plan]] | None = None) -> Frontier:
    """FT's frontier with the plans with stages (`staged_plans`, or what `staged_by` returns) merged
    in: the points no other point dominates in simulated time and peak memory (FT's own points a
    plan with stages dominates leave it). Unchanged where no plan with stages is weighed, or where
    a Ctrl-C stopped FT; a Ctrl-C during the pipeline search keeps the plans with stages priced so
    far (none while a worker searches: it sends its plans at its end)."""
    if stopped(front):
        return front
    try:
        staged = staged_by() if staged_by is not None else staged_plans(ctx, choice)
    except KeyboardInterrupt:
        return marked_frontier(front, Interruption("the pipeline search", "FT's frontier, without plans with stages"))
    if not staged:
        return front
    points = [*front, *staged]
    kept = [p for p in points if not any(_dominates(q, p) for q in points)]
    details = {**front.details, "stages": {"weighed": len(staged), "kept": sum(p in staged for p in kept)}}
    merged = Frontier(kept, details, front.alternatives)
    record = next((interruption(p.details) for p in staged if stopped(p)), None)
    return merged if record is None else marked_frontier(merged, record)


def _dominates(a: Plan, b: Plan) -> bool:
    return (a.iteration_time_s <= b.iteration_time_s and a.peak_memory_bytes <= b.peak_memory_bytes
            and (a.iteration_time_s < b.iteration_time_s or a.peak_memory_bytes < b.peak_memory_bytes))


def _not_slower_than_practitioners(ctx: PlanningContext, best: Plan, side: Beside) -> Plan:
    """`best`, unless a practitioners' plan that fits (`_practitioners_fitting`) is faster,
    simulated: then that one, saying why. Weighed for models of repeated blocks (those
    practitioners configure so); a Ctrl-C while they are priced keeps `best`, marked."""
    if not blocks(ctx.graph):
        return best
    try:
        found = _practitioners_fitting(ctx, side.result("practitioners"), f"it is faster than FT's fastest plan under the cap "
                                            f"({best.iteration_time_s * 1e3:,.1f} ms)")
    except KeyboardInterrupt:
        return marked(best, Interruption("the practitioners' plans", "FT's choice"))
    return found if found is not None and found.iteration_time_s < best.iteration_time_s else best


def _practitioners_plans(ctx: PlanningContext) -> list[Plan | None]:
    """fsdp and fsdp-tp (tensor parallel in a node as well), each recomputing the fewest leading
    blocks with which it fits (search.selective: none where it fits keeping every activation),
    priced side by side; None for one that does not apply to the graph."""
    settings = (("fsdp", {"recompute_to_fit": True}), ("fsdp-tp", {"recompute_to_fit": True}))
    return plans_shared(ctx, partial(_practitioners_plan, ctx), settings)


def _practitioners_fitting(ctx: PlanningContext, plans: list[Plan | None],
                           why: str = "FT's frontier had no plan under the cap") -> Plan | None:
    """The faster of the practitioners' plans (`_practitioners_plans`) that fits the cap, or None;
    its details say it was chosen because of `why`."""
    fitting = [p for p in plans if p is not None and p.peak_memory_bytes <= ctx.memory_cap_bytes]
    if not fitting:
        return None
    best = min(fitting, key=lambda p: p.iteration_time_s)
    layout = "tensor parallel in a node, data parallel across" if best.algorithm == "fsdp-tp" else "data parallel"
    note = (f"{why}; this is the practitioners' plan ({layout}, weights sharded{_recomputed_text(ctx, best)}). "
            "FT over sharded weights and recomputation (--option state_sharding=true, recompute=true) may find "
            "a faster one, more slowly")
    return replace(best, details={**best.details, "chosen_because": note})


def _recomputed_text(ctx: PlanningContext, plan: Plan) -> str:
    count = len(blocks(ctx.graph))
    if not plan.recompute:
        return ""
    if len(plan.recompute) == count:
        return ", every block recomputed"
    return f", the first {len(plan.recompute)} of {count} blocks recomputed: the fewest with which it fits"


def _practitioners_plan(ctx: PlanningContext, setting: tuple[str, dict]) -> Plan | None:
    """One practitioners' setting priced; None for a graph it does not apply to."""
    name, options = setting
    try:
        return registry.run(ctx, name, options)
    except StratagemError:
        return None


def device_counts(cluster: Cluster, start: int = 1, stop: int | None = None) -> list[int]:
    """The device counts the modes try, ascending within [start, stop]: powers of two and three
    times a power of two (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, ...: meshes such as 3x4 and 3x8,
    as clusters of 6, 12 or 24 GPUs are), and `stop` itself (the devices given)."""
    stop = stop or cluster.num_devices
    counts, n = {stop} if stop >= start else set(), 1
    while n <= stop:
        counts.update(c for c in (n, 3 * n) if start <= c <= stop)
        n *= 2
    return sorted(counts)


def fewest_devices(contexts: Iterable[PlanningContext], algorithm: str = "ft", options: Any = None
                   ) -> tuple[Plan, bool]:
    """mini_parallelism: the first context (ascending device counts) whose plan fits; else the
    last one's leanest plan, not fitting. Stopped by Ctrl-C: the last plan found, marked."""
    last = None
    try:
        for ctx in contexts:
            last = plan_at(ctx, algorithm, options)
            if last[1] or stopped(last[0]):
                return last
    except KeyboardInterrupt:
        if last is None:
            raise
        record = Interruption("the device counts", f"the plan at {last[0].num_devices} devices, the most tried")
        return marked(last[0], record), last[1]
    return last


def by_device_count(contexts: Iterable[PlanningContext], algorithm: str = "ft", options: Any = None
                    ) -> dict[int, tuple[Plan, bool]]:
    """profiling: every context's plan and whether it fits. Stopped by Ctrl-C: the device counts
    planned so far, every plan marked."""
    table: dict[int, tuple[Plan, bool]] = {}
    record = None
    try:
        for ctx in contexts:
            plan, fits = table[ctx.num_devices] = plan_at(ctx, algorithm, options)
            record = interruption(plan.details)
            if record is not None:
                break
    except KeyboardInterrupt:
        if not table:
            raise
        record = Interruption("the device counts", f"the {len(table)} device counts planned so far")
    if record is None:
        return table
    return {n: (marked(plan, record), fits) for n, (plan, fits) in table.items()}


def fastest_fitting(table: dict[int, tuple[Plan, bool]]) -> Plan | None:
    fitting = [plan for plan, fits in table.values() if fits]
    return min(fitting, key=lambda p: (p.iteration_time_s, p.num_devices)) if fitting else None
