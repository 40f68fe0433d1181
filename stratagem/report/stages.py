"""A plan's pipeline stages as the reports show them: per stage its ops, devices, micro-batches in
flight and its times per micro-batch, and the schedule's bubble (space.pipeline, sim.pipeline)."""

from __future__ import annotations

from stratagem.plan import Plan
from stratagem.report.plots import pyplot, save
from stratagem.report.tables import Table
from stratagem.report.units import format_seconds
from stratagem.space import stage_ops


def stage_lines(plan: Plan) -> list[str]:
    """The summary's lines on stages; none for a plan without."""
    pipe = plan.strategy.pipeline
    if pipe is None:
        return []
    batch = _micro_batch(plan)
    info = plan.details.get("pipeline", {})
    bubble = f", bubble {100 * info['bubble']:.0f} % of the iteration" if "bubble" in info else ""
    return [f"  stages           {pipe.num_stages} stages of {plan.num_devices // pipe.num_stages} devices, "
            f"{pipe.micro_batches} micro-batches of {batch} ({pipe.micro_batches * batch} a step), "
            f"{pipe.schedule}{bubble}",
            "  cut before       " + ", ".join(pipe.cuts), *_stage_plan_line(plan)]


def _stage_plan_line(plan: Plan) -> list[str]:
    """Which plan each stage runs: one for all (a practitioners' plan), or each stage its own
    point of FT's frontier on a stage's devices (search.pipeline)."""
    kind, points = plan.details.get("stage_plan"), plan.details.get("stage_points")
    if kind is None:
        return []
    if points is None:
        return [f"  stage plan       {kind} in every stage"]
    chosen = ", ".join(str(q) for q in points["chosen"])
    return [f"  stage plans      {kind}: points {chosen} of {points['of']} (FT's frontier and its priced "
            "alternatives on a stage's devices, stage by stage)"]


def stage_table(plan: Plan) -> Table:
    pipe = plan.strategy.pipeline
    info = plan.details.get("pipeline", {})
    times = info.get("stage_times_s") or [[float("nan")] * 5] * pipe.num_stages
    held = info.get("in_flight") or [pipe.in_flight(s) for s in range(pipe.num_stages)]
    rows = []
    for s, (ops, devices) in enumerate(zip(stage_ops(plan.graph, pipe), pipe.stage_devices(plan.num_devices))):
        forward, backward, tail, send, back = times[s]
        rows.append((str(s), f"{devices.start}-{devices.stop - 1}", f"{ops[0]} .. {ops[-1]} ({len(ops)})",
                     format_seconds(forward), format_seconds(backward), format_seconds(send),
                     format_seconds(back), format_seconds(tail), str(held[s])))
    return Table.of(("stage", "devices", "ops", "forward", "backward", "send", "grads back", "sync+update",
                     "in flight"), rows, f"{pipe} (times per micro-batch, simulated)")


def _micro_batch(plan: Plan) -> int:
    return min(plan.graph.batch_sizes, default=1)


def write_schedule_png(plan: Plan, run, path) -> object:
    """The schedule as it runs (sim.schedule.ScheduleRun): a row per stage, each micro-batch's
    forward and backward a bar, the bubble the white between them."""
    plt = pyplot()
    pipe = plan.strategy.pipeline
    figure, axes = plt.subplots(figsize=(10, 0.6 + 0.45 * pipe.num_stages))
    colors = {"F": "#4c78a8", "B": "#59a14f"}
    for a in run.actions:
        axes.barh(a.stage, (a.end_s - a.start_s) * 1e3, left=a.start_s * 1e3, color=colors[a.kind],
                  edgecolor="white", height=0.8)
        if pipe.micro_batches <= 16:
            axes.text((a.start_s + a.end_s) / 2 * 1e3, a.stage, f"{a.kind}{a.micro_batch}", ha="center",
                      va="center", fontsize=7, color="white")
    for s, end in enumerate(run.stage_end_s):
        last = max(a.end_s for a in run.actions if a.stage == s)
        if end > last:
            axes.barh(s, (end - last) * 1e3, left=last * 1e3, color="#bab0ac", height=0.8)
    axes.invert_yaxis()
    axes.set_yticks(range(pipe.num_stages))
    axes.set_yticklabels([f"stage {s}" for s in range(pipe.num_stages)])
    axes.set_xlabel("time (ms, simulated)")
    axes.set_title(f"{plan.model or plan.graph.name} on {plan.cluster}: {pipe} (forward blue, backward green, "
                   "sync and update grey)", fontsize=9)
    return save(figure, path)
