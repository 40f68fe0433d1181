"""Pipeline plans: stage cuts, micro-batch count, schedule and each stage's own plan, found together
(Alpa, Zheng et al. OSDI 2022 §5: a dynamic program over contiguous layer ranges whose inner cost is
a stage's plan; here the stages are equal device blocks, as torchtitan's PP mesh dim has them).

    for each stage count p dividing the devices (2 <= p <= the graph's repeated blocks)
      for each micro-batch count m in {p, 2p, 4p} dividing the batch (fewer leave most stages
          idle; more shrink the bubble below 1/5 and each micro-batch's kernels)
        g_m  = the graph at batch / m (`graph_at`; for a zoo model the zoo's `rebatched`: the
               graph capture gives there, captured, or derived from the capture at the batch)
        for each kind of stage plan on one stage's d = N / p devices (`INNER`: what practitioners
             configure in a stage: data parallel and FSDP where the micro-batch splits over d,
             tensor parallel in a node with FSDP across, the same in every stage; or, asked
             ("ft"), the points Q of FT's frontier of the micro-batch on d devices, each stage
             its own) and with / without recomputation (by default only where the plan without
             does not fit: first, in each stage over the memory cap, the fewest of its leading
             blocks with which it fits, recomputed, and where the cluster has host memory,
             those offloaded instead (bisected further where that pays); then every block
             recomputed):
          items = the blocks (the ops before the first block go with it, after the last with
                  the last): under stage plan q, t_q(i) one micro-batch's forward + backward +
                  weight gathers + re-scheduling into its ops, and the bytes it holds (weights,
                  gradients, optimizer state) and keeps per micro-batch (activations)
          cuts  = `balanced_cuts`: the items cut into p contiguous runs, each stage with its own
                  q, minimizing the largest stage time (Alpa §5.2's stage DP, its inner cost a
                  stage's frontier), by the linear-partition DP
                  C(i, j, s) = min over q in Q whose run i..j-1 fits stage s's memory of
                               sum of t_q(i..j-1)
                  T[j][k]    = min over i < j of max(T[i][k-1], C(i, j, k-1))
          the plan: every op's configuration, its stage's q's, moved into its stage's block
                  (space.pipeline.staged), simulated (sim.pipeline: one micro-batch's timeline,
                  then the schedule)
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
from stratagem.search.context import (
    PlanningContext, context, fits_host, labels_of, least_time, make_plan, offloading, recomputing,
)
from stratagem.search.progress import phase
from stratagem.search.stopping import Interruption, marked, raise_if_stopped
from stratagem.search.strategies import data_parallel_strategy, tensor_parallel_strategy, with_sharded_state
from stratagem.space import SCHEDULES, Pipeline, Strategy, divisors, stage_of
from stratagem.space.micro_batching import check_micro_batchable
from stratagem.space.pipeline import in_flight, staged

INNER = ("data-parallel", "fsdp", "fsdp-tp")       # tried by default
STAGE_PLANS = (*INNER, "ft")                        # "ft": each stage a point of FT's frontier on d devices


@dataclass(frozen=True)
class PipelineOptions:
    stages: int = field(default=0, metadata={"help": "stage count (0: every divisor of the devices that fits)"})
    micro_batches: int = field(default=0, metadata={"help": "micro-batch count (0: 1, 2 and 4 times the stage "
                                                             "count, where they divide the batch)"})
    schedule: str = field(default="1f1b", metadata={"help": "gpipe | 1f1b"})
    inner: str = field(default="", metadata={"help": "each stage's plan: data-parallel | fsdp | fsdp-tp | ft "
                                                     "(each stage a point of FT's frontier on its devices, "
                                                     "chosen with the cuts; empty: the first three)"})
    recompute: str = field(default="auto", metadata={"help": "recompute every block: yes | no | both | auto "
                                                             "(where the plan without does not fit: the blocks of "
                                                             "the stages over the cap, else every block)"})
    offload: str = field(default="auto", metadata={"help": "under recompute=auto, also offload the activations "
                                                           "of the blocks of the stages over the cap instead: auto "
                                                           "(where the cluster has host memory) | no"})


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
                    plans += _with_activation_savings(micro, stage, p, m, inner, options)
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


def _with_activation_savings(micro: PlanningContext, stage: PlanningContext, p: int, m: int, inner: str,
                             options: PipelineOptions) -> list[Plan]:
    """The candidates of one (p, m, inner plan): as `options.recompute` asks; under "auto" the
    plan keeping every activation, and where it does not fit, the one recomputing the fewest
    blocks of the stages over the cap and (where the cluster has host memory and
    `options.offload` allows) the one offloading them instead (`_offloaded_instead`), and where
    neither fits (or is every block), the one recomputing every block."""
    choices = inner_strategies(stage, inner)          # FT's frontier for "ft": found once
    if not choices:
        return []
    if options.recompute != "auto":
        found = (_candidate(micro, stage, p, m, inner, choices, r, options.schedule)
                 for r in _recompute_choices(options))
        return [plan for plan in found if plan is not None]
    plain = _candidate(micro, stage, p, m, inner, choices, False, options.schedule)
    if plain is None or _fits(plain, micro):
        return [plain] if plain is not None else []
    recomputed = save_stages_over(micro, plain)
    saved = [] if recomputed is None else [recomputed]
    if recomputed is not None and micro.model.cluster.spec.host is not None and options.offload == "auto":
        saved.append(_offloaded_instead(micro, plain, recomputed))
    if any(_fits(plan, micro) for plan in saved):
        return [plain, *saved]
    fully = _candidate(micro, stage, p, m, inner, choices, True, options.schedule)
    return [plain, *saved, *([fully] if fully is not None else [])]


def _offloaded_instead(micro: PlanningContext, plain: Plan, recomputed: Plan) -> Plan:
    """`plain` offloading, in each stage, the blocks `recomputed` recomputes there (one simulation);
    where that fits and beats recomputing them (or recomputing does not fit), the fewest leading
    blocks per stage with which offloading fits (bisected below those counts)."""
    by_stage = _blocks_by_stage(micro, plain)
    counts = {s: sum(name in recomputed.recompute for name in names) for s, names in by_stage.items()}
    counts = {s: k for s, k in counts.items() if k}
    probe = _saving_stages(micro, plain, by_stage, counts, "offload")
    faster = probe.iteration_time_s < recomputed.iteration_time_s
    pays = _fits(probe, micro) and (faster or not _fits(recomputed, micro))
    return (save_stages_over(micro, plain, "offload", counts, probe) or probe) if pays else probe


def _candidate(micro: PlanningContext, stage: PlanningContext, p: int, m: int, inner: str, choices: tuple[dict, ...],
               recompute: bool, schedule: str) -> Plan | None:
    """The pipeline of p stages and m micro-batches whose cuts and stage plans (of `choices`, plans
    of one stage's devices) the stage DP chooses, every block recomputed or none, simulated."""
    ctx, stage = (recomputing(micro), recomputing(stage)) if recompute else (micro, stage)
    found = balanced_cuts(ctx, stage, choices, p, m, schedule)
    if found is None:
        return None
    cuts, chosen = found
    pipe = Pipeline(cuts, m, schedule)
    stage_index = stage_of(ctx.graph, pipe)
    per_op = {op.name: choices[chosen[stage_index[op.name]]][op.name] for op in ctx.graph.ops}
    strategy = Strategy(staged(ctx.graph, pipe, ctx.num_devices, per_op), pipeline=pipe)
    label = f"pipeline {p}x{m} {schedule}, {inner}" + (" + recompute" if recompute else "")
    details = {"stage_plan": inner, "label": label}
    if len(choices) > 1:
        details["stage_points"] = {"chosen": list(chosen), "of": len(choices)}
    return make_plan(ctx, strategy, "pipeline", details=details)


def save_stages_over(micro: PlanningContext, plan: Plan, saving: str = "recompute",
                     at_most: dict[int, int] | None = None, known: Plan | None = None) -> Plan | None:
    """The plan recomputing (or offloading: `saving`), in each stage over the memory cap (1F1B's
    first stages hold the most micro-batches), the fewest of that stage's leading blocks with which
    it fits, the other stages keeping their activations; None where no stage is over. Where a stage
    is over even saving all its blocks, the plan saving every block of the stages over (the caller
    then tries recomputing every block). search.selective's reasoning stage by stage:
    stages hold disjoint devices, so a stage's blocks change its own peak only, and every stage
    over the cap is bisected at once, one simulation per round (about log2 of a stage's blocks).
    `at_most`: per stage, the count known to fit (the bisection's upper ends; a stage's blocks
    where not given); `known`: the plan saving those counts, where the caller has it."""
    pipe = plan.strategy.pipeline
    devices = pipe.stage_devices(plan.num_devices)
    by_stage = _blocks_by_stage(micro, plan)

    def over_cap(tried: Plan, s: int) -> bool:
        return max(tried.details["peak_memory_per_device"][d] for d in devices[s]) > micro.memory_cap_bytes

    over = [s for s in range(pipe.num_stages) if over_cap(plan, s)]
    if not over or any(s not in by_stage for s in over):
        return None
    low, high = dict.fromkeys(over, 0), {s: (at_most or {}).get(s, len(by_stage[s])) for s in over}
    tried: dict[tuple, Plan] = {} if known is None else {tuple(sorted(high.items())): known}

    def made(counts: dict[int, int]) -> Plan:
        key = tuple(sorted(counts.items()))
        if key not in tried:
            tried[key] = _saving_stages(micro, plan, by_stage, counts, saving)
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


def _blocks_by_stage(micro: PlanningContext, plan: Plan) -> dict[int, list[str]]:
    """Each stage's blocks, in program order."""
    stage = stage_of(plan.graph, plan.strategy.pipeline)
    by_stage: dict[int, list[str]] = {}
    for block in blocks(micro.graph):
        by_stage.setdefault(stage[block.ops[0]], []).append(block.name)
    return by_stage


def _saving_stages(micro: PlanningContext, plan: Plan, by_stage: dict[int, list[str]], counts: dict[int, int],
                   saving: str) -> Plan:
    """`plan` with the first counts[s] blocks of each stage s recomputed (or offloaded), simulated."""
    names = tuple(name for s, k in sorted(counts.items()) for name in by_stage[s][:k])
    shown = ", ".join(f"{k} of stage {s}" for s, k in sorted(counts.items()) if k)
    label = f"{plan.details['label']} + {saving} {shown}"
    ctx = recomputing(micro, names) if saving == "recompute" else offloading(micro, names)
    return make_plan(ctx, plan.strategy, "pipeline", details={**labels_of(plan), "label": label})


def _fits(plan: Plan, ctx: PlanningContext) -> bool:
    return plan.peak_memory_bytes <= ctx.memory_cap_bytes and fits_host(plan)


def inner_strategies(stage: PlanningContext, inner: str) -> tuple[dict, ...]:
    """The plans a stage on d devices (devices 0..d-1) may take: a practitioners' plan (none where
    it does not apply), or for "ft" every point of FT's frontier of the micro-batch there and the
    alternatives it priced (data parallel, FSDP), each stage choosing its own."""
    if inner == "ft":
        front = frontier(stage)
        raise_if_stopped(front)
        found: dict[tuple, dict] = {}
        for plan in (*front, *front.alternatives):
            ops = dict(plan.strategy.ops)
            found.setdefault(tuple(ops.items()), ops)
        return tuple(found.values())
    if inner == "data-parallel":
        return (data_parallel_strategy(stage),)
    if inner == "fsdp":
        return (with_sharded_state(stage, data_parallel_strategy(stage)),) if stage.num_devices > 1 else ()
    tensor = tensor_width(stage)
    if tensor < 2:
        return ()
    return (with_sharded_state(stage, tensor_parallel_strategy(stage, tensor)),)


@dataclass(frozen=True)
class StageItems:
    """Per item (a block with the ops before the first or after the last) under one stage plan:
    one micro-batch's forward + backward + weight gathers + re-scheduling into its ops, what it
    holds whatever the micro-batches (weights, gradients, optimizer state), and what it keeps per
    micro-batch in flight (activations, kept re-scheduled copies)."""
    time_s: tuple[float, ...]
    held_bytes: tuple[float, ...]
    kept_bytes: tuple[float, ...]


def stage_items(stage: PlanningContext, per_stage: dict, starts: list[int]) -> StageItems:
    """The items between `starts` (`_block_starts`) under `per_stage`, by the cost model on a
    stage's devices (each edge counted with its consumer's item)."""
    model, ops = stage.model, stage.graph.ops
    times, held, kept = [0.0] * len(ops), [0.0] * len(ops), [0.0] * len(ops)
    for i, op in enumerate(ops):
        cost = model.op_cost(op.name, per_stage[op.name])
        times[i] = cost.forward_time_s + cost.backward_time_s + cost.gather_time_s
        memory = cost.memory
        held[i] = memory.parameter_bytes + memory.gradient_bytes + memory.optimizer_bytes
        kept[i] = memory.activation_bytes
    index = stage.graph.op_index
    for edge in model.edges():
        cost = model.edge_cost_in(edge, per_stage)
        times[index[edge.dst_op]] += cost.time_s
        kept[index[edge.dst_op]] += cost.extra_memory_bytes

    def per_item(values: list[float]) -> tuple[float, ...]:
        return tuple(sum(values[a:b]) for a, b in zip(starts, starts[1:]))
    return StageItems(per_item(times), per_item(held), per_item(kept))


def balanced_cuts(ctx: PlanningContext, stage: PlanningContext, choices: tuple[dict, ...], p: int, m: int,
                  schedule: str) -> tuple[tuple[str, ...], tuple[int, ...]] | None:
    """The first op of stages 1..p-1 of a pipeline of m micro-batches under `schedule`, and which
    of `choices` (stage plans on d devices) each stage takes: the items cut into p runs of least
    largest time, each run under its stage's choice, among cuts that keep each weight's readers in
    one stage and stage plans that fit the memory cap by the cost model's account (a stage's
    weights, gradients and optimizer state, and one micro-batch's activations for each
    micro-batch it holds at once); where none fits, the least largest time alone."""
    graph = ctx.graph
    if len(blocks(graph)) < p:
        return None
    starts = _block_starts(graph)
    items = [stage_items(stage, choice, starts) for choice in choices]
    allowed = _allowed_cuts(graph, starts)
    found = None
    for memory_bound in (True, False):
        run_cost = _stage_cost(items, lambda s: in_flight(schedule, m, p, s), ctx.memory_cap_bytes, memory_bound)
        found = _partition_runs(len(starts) - 1, p, allowed, run_cost)
        if found is not None:
            break
    if found is None:
        return None
    cuts, chosen = found
    return tuple(graph.ops[starts[i]].name for i in cuts), tuple(chosen)


def _stage_cost(items: list[StageItems], in_flight_of: Callable[[int], int], cap_bytes: float,
                memory_bound: bool) -> Callable[[int, int, int], tuple[float, int]]:
    """C(i, j, s): the least time of items i..j-1 as stage s over the choices whose run fits the cap
    (every choice where not `memory_bound`), and which choice; (inf, -1) where none fits."""
    prefixes = [(_prefix(it.time_s), _prefix(it.held_bytes), _prefix(it.kept_bytes)) for it in items]
    memo: dict[tuple[int, int, int], tuple[float, int]] = {}

    def cost(i: int, j: int, s: int) -> tuple[float, int]:
        flight = in_flight_of(s)
        key = (i, j, flight)
        if key not in memo:
            best = (float("inf"), -1)
            for q, (time, held, kept) in enumerate(prefixes):
                if memory_bound and (held[j] - held[i]) + flight * (kept[j] - kept[i]) > cap_bytes:
                    continue
                best = min(best, (time[j] - time[i], q))
            memo[key] = best
        return memo[key]
    return cost


def _prefix(values: tuple[float, ...]) -> list[float]:
    out = [0.0]
    for x in values:
        out.append(out[-1] + x)
    return out


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
    prefix = _prefix(tuple(items))

    def run_cost(i: int, j: int, k: int) -> tuple[float, int]:
        if fits is not None and not fits(i, j, k):
            return float("inf"), -1
        return prefix[j] - prefix[i], 0
    found = _partition_runs(len(items), parts, allowed, run_cost)
    return None if found is None else found[0]


def _partition_runs(n: int, parts: int, allowed: set[int], run_cost: Callable[[int, int, int], tuple[float, int]]
                    ) -> tuple[list[int], list[int]] | None:
    """The linear-partition DP over n items: cut positions splitting them into `parts` contiguous
    runs whose largest cost is least, run k of items i..j-1 costing run_cost(i, j, k) = (cost,
    choice) (inf: not allowed), cuts only at `allowed` positions; with each run's choice. None
    when no such cut exists."""
    inf = float("inf")
    best = [[inf] * (parts + 1) for _ in range(n + 1)]
    back = [[(-1, -1)] * (parts + 1) for _ in range(n + 1)]
    best[0][0] = 0.0
    for k in range(1, parts + 1):
        for j in range(k, n + 1):
            if j < n and j not in allowed:
                continue
            for i in range(k - 1, j):
                if best[i][k - 1] == inf or (i > 0 and i not in allowed) or best[i][k - 1] >= best[j][k]:
                    continue
                run, choice = run_cost(i, j, k - 1)
                cost = max(best[i][k - 1], run)
                if cost < best[j][k]:
                    best[j][k], back[j][k] = cost, (i, choice)
    if best[n][parts] == inf:
        return None
    cuts, chosen, j = [], [], n
    for k in range(parts, 0, -1):
        j, choice = back[j][k]
        cuts.append(j)
        chosen.append(choice)
    return sorted(cuts)[1:], chosen[::-1]


def _check(options: PipelineOptions) -> None:
    if options.schedule not in SCHEDULES:
        raise ConfigError("unknown pipeline schedule", expected=" | ".join(SCHEDULES), got=repr(options.schedule))
    if options.inner and options.inner not in STAGE_PLANS:
        raise ConfigError("unknown stage plan", expected=" | ".join(STAGE_PLANS), got=repr(options.inner))
    if options.offload not in ("auto", "no"):
        raise ConfigError("offload option is not valid", expected="auto | no", got=repr(options.offload))
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
