"""Pipeline plans: stage cuts, micro-batch count, schedule and each stage's own plan, found together
(Alpa, Zheng et al. OSDI 2022 §5: a dynamic program over contiguous layer ranges whose inner cost is
a stage's plan; here the stages are equal device blocks, as torchtitan's PP mesh dim has them).

    for each stage count p dividing the devices (2 <= p <= the graph's repeated blocks)
      for each micro-batch count m in {p, 2p, 4p} dividing the batch (fewer leave most stages
          idle; more shrink the bubble below 1/5 and each micro-batch's kernels)
        g_m  = the graph at batch / m (`graph_at`; for a zoo model the zoo's `rebatched`: the
               graph capture gives there, derived from the capture at the batch where that is exact)
        for each inner plan of one stage's d = N / p devices (`INNER`: what practitioners
             configure in a stage: data parallel and FSDP where the micro-batch splits over d,
             tensor parallel in a node with FSDP across; or, asked, FT's fastest plan of the
             micro-batch on d devices, the same in every stage) and with / without recomputation
             (by default only where the plan without does not fit: first, in each stage over
             the memory cap, the fewest of its leading blocks with which it fits, then every
             block):
          cuts  = `balanced_cuts`: the blocks cut into p contiguous runs minimizing the largest
                  run's forward + backward time (the ops before the first block go with stage 0,
                  after the last with stage p - 1), by the linear-partition DP
                  T[j][k] = min over i < j of max(T[i][k-1], sum of items i..j-1)
          the plan: every op's configuration moved into its stage's block (space.pipeline.staged),
                  simulated (sim.pipeline: one micro-batch's timeline, then the schedule)
A weight two stages would read (a tied embedding and head) rules a cut out; graphs whose blocks
cannot be cut so give no pipeline plans, nor graphs that micro-batches would train differently
(space.micro_batching: batch normalization, dropout, a loss that is no mean or sum, ...).

`pipeline_plans(ctx, options)` returns every plan priced; `pipeline(ctx, options)` (the
registered search "pipeline") the fastest under the memory cap, else the leanest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from stratagem.cost.recompute import blocks
from stratagem.errors import ConfigError, StratagemError
from stratagem.ir import Graph, Role
from stratagem.plan import Plan
from stratagem.search.baselines import tensor_width
from stratagem.search.ft_search import frontier
from stratagem.search.context import PlanningContext, context, least_time, make_plan, recomputing
from stratagem.search.progress import phase
from stratagem.search.stopping import Interruption, marked, raise_if_stopped
from stratagem.search.strategies import data_parallel_strategy, tensor_parallel_strategy, with_sharded_state
from stratagem.space import SCHEDULES, Pipeline, Strategy, divisors, stage_of
from stratagem.space.micro_batching import check_micro_batchable
from stratagem.space.pipeline import in_flight, staged

INNER = ("data-parallel", "fsdp", "fsdp-tp")       # tried by default
STAGE_PLANS = (*INNER, "ft")                        # "ft": FT's fastest plan of the micro-batch on d devices


@dataclass(frozen=True)
class PipelineOptions:
    stages: int = field(default=0, metadata={"help": "stage count (0: every divisor of the devices that fits)"})
    micro_batches: int = field(default=0, metadata={"help": "micro-batch count (0: 1, 2 and 4 times the stage "
                                                             "count, where they divide the batch)"})
    schedule: str = field(default="1f1b", metadata={"help": "gpipe | 1f1b"})
    inner: str = field(default="", metadata={"help": "each stage's plan: data-parallel | fsdp | fsdp-tp | ft "
                                                     "(FT's fastest on a stage's devices; empty: the first three)"})
    recompute: str = field(default="auto", metadata={"help": "recompute every block: yes | no | both | auto "
                                                             "(where the plan without does not fit: the blocks of "
                                                             "the stages over the cap, else every block)"})


def pipeline(ctx: PlanningContext, options: PipelineOptions = PipelineOptions()) -> Plan:
    plans = pipeline_plans(ctx, options)
    try:
        return least_time(plans, ctx.memory_cap_bytes)
    except StratagemError:
        return min(plans, key=lambda p: (p.peak_memory_bytes, p.iteration_time_s))


def pipeline_plans(ctx: PlanningContext, options: PipelineOptions = PipelineOptions(),
                   graph_at: Callable[[int], Graph] | None = None) -> list[Plan]:
    """Every (stages, micro-batches, inner plan, recomputation) candidate, simulated; a phase of
    ctx.progress in (stage count, micro-batch count) pairs. A Ctrl-C keeps the candidates priced,
    each marked (search.stopping); with none yet, it is raised."""
    _check(options)
    check_micro_batchable(ctx.graph)
    batch = _batch(ctx.graph)
    graph_at = graph_at or _zoo_graph(ctx)
    pairs = [(p, m) for p in _stage_counts(ctx, options) if _can_cut(ctx.graph, p)
             for m in _micro_batch_counts(batch, p, options)]
    plans, graphs, micro_contexts = [], {}, {}
    with phase(ctx.progress, "pipeline: stage and micro-batch counts", len(pairs)):
        try:
            for p, m in pairs:
                if m not in micro_contexts:
                    graphs[m] = graph_at(batch // m)
                    micro_contexts[m] = replace(context(graphs[m], ctx.cluster, ctx.num_devices, ctx.optimizer,
                                                        ctx.memory_cap_bytes, precision=ctx.precision),
                                                cluster_name=ctx.cluster_name, zoo_name=ctx.zoo_name)
                micro = micro_contexts[m]
                stage = context(graphs[m], ctx.cluster, ctx.num_devices // p, ctx.optimizer,
                                precision=ctx.precision)
                for inner in _inner_plans(options, batch // m, ctx.num_devices // p):
                    plans += _with_recomputation(micro, stage, p, m, inner, options)
                ctx.progress.advance()
        except KeyboardInterrupt:
            if not plans:
                raise
            record = Interruption("the pipeline search", f"the {len(plans)} plans with stages priced so far")
            return [marked(plan, record) for plan in plans]
    if not plans:
        raise StratagemError("no pipeline plan for this graph and device count",
                             expected="a graph of 2 or more repeated blocks (module-list elements) whose "
                                      "weights each stage reads alone, and a stage count dividing the devices",
                             got=f"{len(blocks(ctx.graph))} blocks, {ctx.num_devices} devices",
                             hint="Plan without stages (--algorithm ft, fsdp, fsdp-tp)")
    return plans


def _with_recomputation(micro: PlanningContext, stage: PlanningContext, p: int, m: int, inner: str,
                        options: PipelineOptions) -> list[Plan]:
    """The candidates of one (p, m, inner plan): as `options.recompute` asks; under "auto" the
    plan keeping every activation, and where it does not fit, the one recomputing the blocks of
    the stages over the cap, and where that does not fit either (or is every block), the one
    recomputing every block."""
    if options.recompute != "auto":
        found = (_candidate(micro, stage, p, m, inner, r, options.schedule) for r in _recompute_choices(options))
        return [plan for plan in found if plan is not None]
    plain = _candidate(micro, stage, p, m, inner, False, options.schedule)
    if plain is None or _fits(plain, micro):
        return [plain] if plain is not None else []
    found = [plain]
    partly = recompute_stages_over(micro, plain)
    if partly is not None:
        found.append(partly)
        if _fits(partly, micro):
            return found
    fully = _candidate(micro, stage, p, m, inner, True, options.schedule)
    return found + ([fully] if fully is not None else [])


def _candidate(micro: PlanningContext, stage: PlanningContext, p: int, m: int, inner: str, recompute: bool,
               schedule: str) -> Plan | None:
    per_stage = inner_strategy(stage, inner)
    if per_stage is None:
        return None
    ctx, stage = (recomputing(micro), recomputing(stage)) if recompute else (micro, stage)
    cuts = balanced_cuts(ctx, stage, per_stage, p, m, schedule)
    if cuts is None:
        return None
    pipe = Pipeline(cuts, m, schedule)
    strategy = Strategy(staged(ctx.graph, pipe, ctx.num_devices, per_stage), pipeline=pipe)
    label = f"pipeline {p}x{m} {schedule}, {inner}" + (" + recompute" if recompute else "")
    return make_plan(ctx, strategy, "pipeline", details={"stage_plan": inner, "label": label})


def recompute_stages_over(micro: PlanningContext, plan: Plan) -> Plan | None:
    """The plan recomputing, in each stage over the memory cap (1F1B's first stages hold the most
    micro-batches), the fewest of that stage's leading blocks with which it fits, the other stages
    keeping their activations; None where no stage is over. Where a stage is over even recomputing
    all its blocks, the plan recomputing every block of the stages over (the caller then tries
    every block). search.selective's reasoning stage by stage:
    stages hold disjoint devices, so a stage's blocks change its own peak only, and every stage
    over the cap is bisected at once, one simulation per round (about log2 of a stage's blocks)."""
    pipe = plan.strategy.pipeline
    devices = pipe.stage_devices(plan.num_devices)
    stage = stage_of(plan.graph, pipe)
    by_stage: dict[int, list[str]] = {}
    for block in blocks(micro.graph):
        by_stage.setdefault(stage[block.ops[0]], []).append(block.name)

    def over_cap(tried: Plan, s: int) -> bool:
        return max(tried.details["peak_memory_per_device"][d] for d in devices[s]) > micro.memory_cap_bytes

    over = [s for s in range(pipe.num_stages) if over_cap(plan, s)]
    if not over or any(s not in by_stage for s in over):
        return None
    low, high = dict.fromkeys(over, 0), {s: len(by_stage[s]) for s in over}
    tried: dict[tuple, Plan] = {}

    def made(counts: dict[int, int]) -> Plan:
        key = tuple(sorted(counts.items()))
        if key not in tried:
            tried[key] = _recomputing_stages(micro, plan, by_stage, counts)
        return tried[key]

    if any(over_cap(made(high), s) for s in over):
        return made(high)
    while any(high[s] - low[s] > 1 for s in over):
        middle = {s: (low[s] + high[s]) // 2 if high[s] - low[s] > 1 else high[s] for s in over}
        probe = made(middle)
        for s in over:
            if high[s] - low[s] > 1:
                low[s], high[s] = (middle[s], high[s]) if over_cap(probe, s) else (low[s], middle[s])
    return made(high)


def _recomputing_stages(micro: PlanningContext, plan: Plan, by_stage: dict[int, list[str]],
                        counts: dict[int, int]) -> Plan:
    """`plan` with the first counts[s] blocks of each stage s recomputed, simulated."""
    names = tuple(name for s, k in sorted(counts.items()) for name in by_stage[s][:k])
    shown = ", ".join(f"{k} of stage {s}" for s, k in sorted(counts.items()) if k)
    label = f"{plan.details['label']} + recompute {shown}"
    return make_plan(recomputing(micro, names), plan.strategy, "pipeline",
                     details={"stage_plan": plan.details["stage_plan"], "label": label})


def _fits(plan: Plan, ctx: PlanningContext) -> bool:
    return plan.peak_memory_bytes <= ctx.memory_cap_bytes


def inner_strategy(stage: PlanningContext, inner: str) -> dict | None:
    """One stage's plan on its d devices (devices 0..d-1), or None where it does not apply."""
    if inner == "data-parallel":
        return data_parallel_strategy(stage)
    if inner == "ft":
        front = frontier(stage)
        raise_if_stopped(front)
        return dict(mini_time_or_fastest(front, stage.memory_cap_bytes).strategy.ops)
    if inner == "fsdp":
        return with_sharded_state(stage, data_parallel_strategy(stage)) if stage.num_devices > 1 else None
    tensor = tensor_width(stage)
    if tensor < 2:
        return None
    return with_sharded_state(stage, tensor_parallel_strategy(stage, tensor))


def balanced_cuts(ctx: PlanningContext, stage: PlanningContext, per_stage: dict, p: int, m: int,
                  schedule: str) -> tuple[str, ...] | None:
    """The first op of stages 1..p-1 of a pipeline of m micro-batches under `schedule`: the
    blocks cut into p runs of least largest time (the linear-partition DP), among cuts that keep
    each weight's readers in one stage and whose stages fit the memory cap by the cost model's
    account (a stage's weights, gradients and optimizer state, and one micro-batch's activations
    for each micro-batch it holds at once); where none fits, the least largest time alone."""
    graph = ctx.graph
    if len(blocks(graph)) < p:
        return None
    starts = _block_starts(graph)
    costs = [stage.model.op_cost(op.name, per_stage[op.name]) for op in graph.ops]
    items = [sum(c.forward_time_s + c.backward_time_s for c in costs[a:b]) for a, b in zip(starts, starts[1:])]
    held = [sum(c.memory.parameter_bytes + c.memory.gradient_bytes + c.memory.optimizer_bytes for c in costs[a:b])
            for a, b in zip(starts, starts[1:])]
    kept = [sum(c.memory.activation_bytes for c in costs[a:b]) for a, b in zip(starts, starts[1:])]

    def fits(i: int, j: int, s: int) -> bool:
        return sum(held[i:j]) + in_flight(schedule, m, p, s) * sum(kept[i:j]) <= ctx.memory_cap_bytes

    allowed = _allowed_cuts(graph, starts)
    chosen = _partition(items, p, allowed, fits)
    if chosen is None:
        chosen = _partition(items, p, allowed)
    return None if chosen is None else tuple(graph.ops[starts[i]].name for i in chosen)


def mini_time_or_fastest(front, cap_bytes: float) -> Plan:
    """The frontier's least time under the cap, else its fastest point."""
    try:
        return least_time([*front, *front.alternatives], cap_bytes)
    except StratagemError:
        return front.min_time


def _can_cut(graph: Graph, parts: int) -> bool:
    """Whether the graph's blocks can be cut into `parts` stages without splitting a weight's readers."""
    if len(blocks(graph)) < parts:
        return False
    starts = _block_starts(graph)
    return _partition([1.0] * (len(starts) - 1), parts, _allowed_cuts(graph, starts)) is not None


def _block_starts(graph: Graph) -> list[int]:
    """Where each block's run of ops starts (the first with the ops before it), and the end: the
    items the cuts fall between (ops after the last block go with it)."""
    index = graph.op_index
    return [0] + [index[b.ops[0]] for b in blocks(graph)[1:]] + [len(graph.ops)]


def _allowed_cuts(graph: Graph, starts: list[int]) -> set[int]:
    """Item indices i (a cut before item i) that no weight's readers straddle."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, op in enumerate(graph.ops):
        for t in op.inputs:
            if graph.tensors[t].role in (Role.WEIGHT, Role.BUFFER):
                first.setdefault(t, i)
                last[t] = i
    spans = [(first[t], last[t]) for t in first]
    return {i for i in range(1, len(starts) - 1)
            if not any(a < starts[i] <= b for a, b in spans)}


def _partition(items: list[float], parts: int, allowed: set[int],
               fits: Callable[[int, int, int], bool] | None = None) -> list[int] | None:
    """Cut positions (item indices) splitting `items` into `parts` contiguous runs whose largest
    sum is least; cuts only at `allowed` positions, and (given `fits`) only runs items[i:j] that
    fits(i, j, run index) allows. None when no such cut exists."""
    n = len(items)
    prefix = [0.0]
    for x in items:
        prefix.append(prefix[-1] + x)
    inf = float("inf")
    best = [[inf] * (parts + 1) for _ in range(n + 1)]
    back = [[-1] * (parts + 1) for _ in range(n + 1)]
    best[0][0] = 0.0
    for k in range(1, parts + 1):
        for j in range(k, n + 1):
            if j < n and j not in allowed:
                continue
            for i in range(k - 1, j):
                if best[i][k - 1] == inf or (i > 0 and i not in allowed):
                    continue
                if fits is not None and not fits(i, j, k - 1):
                    continue
                cost = max(best[i][k - 1], prefix[j] - prefix[i])
                if cost < best[j][k]:
                    best[j][k], back[j][k] = cost, i
    if best[n][parts] == inf:
        return None
    cuts, j = [], n
    for k in range(parts, 0, -1):
        j = back[j][k]
        cuts.append(j)
    return sorted(cuts)[1:]


def _check(options: PipelineOptions) -> None:
    if options.schedule not in SCHEDULES:
        raise ConfigError("unknown pipeline schedule", expected=" | ".join(SCHEDULES), got=repr(options.schedule))
    if options.inner and options.inner not in STAGE_PLANS:
        raise ConfigError("unknown stage plan", expected=" | ".join(STAGE_PLANS), got=repr(options.inner))
    if options.recompute not in ("yes", "no", "both", "auto"):
        raise ConfigError("recompute option is not valid", expected="yes | no | both | auto",
                          got=repr(options.recompute))


def _inner_plans(options: PipelineOptions, micro_batch: int, stage_devices: int) -> tuple[str, ...]:
    """The stage plans to try: the one asked for, else all; data parallel and FSDP only where the
    micro-batch splits over the stage's devices (else every device would compute the same)."""
    if options.inner:
        return (options.inner,)
    splits = micro_batch % stage_devices == 0
    return tuple(inner for inner in INNER if splits or inner == "fsdp-tp")


def _recompute_choices(options: PipelineOptions) -> tuple[bool, ...]:
    return {"yes": (True,), "no": (False,), "both": (False, True)}[options.recompute]


def _stage_counts(ctx: PlanningContext, options: PipelineOptions) -> list[int]:
    limit = len(blocks(ctx.graph))
    if options.stages:
        if ctx.num_devices % options.stages or not 2 <= options.stages <= max(limit, 2):
            raise ConfigError("stage count is not valid",
                              expected=f"a divisor of {ctx.num_devices} devices from 2 to {limit} (the blocks)",
                              got=str(options.stages))
        return [options.stages]
    return [p for p in divisors(ctx.num_devices) if 2 <= p <= limit]


def _micro_batch_counts(batch: int, stages: int, options: PipelineOptions) -> list[int]:
    if options.micro_batches:
        if batch % options.micro_batches:
            raise ConfigError("micro-batch count does not divide the batch",
                              expected=f"a divisor of the batch of {batch}", got=str(options.micro_batches),
                              hint="Micro-batches come from the global batch: build the model with a larger batch")
        return [options.micro_batches]
    return [m for m in divisors(batch) if m in (stages, 2 * stages, 4 * stages)]


def _batch(graph: Graph) -> int:
    sizes = graph.batch_sizes
    if len(sizes) != 1:
        raise ConfigError("the graph's batch is not known", expected="inputs with one batch size (their sample dim)",
                          got=f"batch sizes {sorted(sizes)}")
    return next(iter(sizes))


def in_zoo(name: str) -> bool:
    from stratagem import zoo
    try:
        zoo.info(name)
    except StratagemError:
        return False
    return True


def _zoo_graph(ctx: PlanningContext) -> Callable[[int], Graph]:
    """The zoo model the context plans, at another batch size: the graph its capture there gives,
    derived from the capture at the context's batch where that is exact (frontend/rebatch.py)."""
    name = ctx.zoo_name or ctx.graph.name
    captured_batch = _batch(ctx.graph)
    if not in_zoo(name):
        raise ConfigError("pipeline stages need the model at the micro-batch size",
                          expected="a zoo model (sg.zoo.build(name))", got=f"graph {ctx.graph.name!r}",
                          hint="Pass graph_at=lambda batch: sg.capture(module, inputs of that batch)")

    def build(batch: int) -> Graph:
        from stratagem import zoo
        return zoo.rebatched(name, batch_size=batch, captured_batch=captured_batch)
    return build
