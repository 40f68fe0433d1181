"""Peak memory against iteration time: the frontier with its compute and network time as dotted
lines, and the baselines as labelled points (TensorOpt Fig. 6).

    points = frontier_points(front, model)          # additive and simulated costs of each plan
    baselines = baseline_points(ctx, front)         # data parallel, OptCNN, ToFu-like, Mesh-TF
    write_frontier_png(points, baselines, "frontier.png", title, memory_cap_bytes)
The frontier is Pareto-optimal in the additive costs (TensorOpt Eq. 3), so those are the solid
line; each plan's simulated (peak memory, iteration time) is drawn beside it as a hollow marker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from stratagem.errors import StratagemError
from stratagem.plan import Plan
from stratagem.report.explain import explain, totals
from stratagem.report.tables import Table
from stratagem.report.units import format_bytes, format_seconds
from stratagem.search import baselines
from stratagem.search.baselines import RestrictedOptions
from stratagem.report.plots import pyplot, save

GiB = 2 ** 30
BASELINE_ORDER = ("data-parallel", "optcnn", "tofu-like", "mesh-tf")
BASELINE_LABELS = {"data-parallel": "Data Parallel", "optcnn": "OptCNN", "tofu-like": "ToFu",
                   "mesh-tf": "Mesh-TF"}


@dataclass(frozen=True)
class FrontierPoint:
    additive_memory_bytes: float
    additive_time_s: float
    compute_time_s: float          # additive: forward + backward + update of every op
    network_time_s: float          # additive: gradient sync + re-scheduling
    peak_memory_bytes: float       # simulated
    iteration_time_s: float        # simulated

    @staticmethod
    def of(plan: Plan, model) -> "FrontierPoint":
        """`model` prices plans of its graph; a plan with stages (one micro-batch's graph) its own."""
        sums = totals(explain(plan, model if plan.strategy.pipeline is None else None))
        return FrontierPoint(plan.additive_memory_bytes, plan.additive_time_s, sums["compute_time_s"],
                             sums["sync_time_s"] + sums["reschedule_time_s"], plan.peak_memory_bytes,
                             plan.iteration_time_s)


def frontier_points(plans: Sequence[Plan], model) -> list[FrontierPoint]:
    return [FrontierPoint.of(p, model) for p in plans]


def baseline_plans(ctx, front, names: Sequence[str] = BASELINE_ORDER) -> dict[str, list[Plan] | str]:
    """Each baseline as plans (one point, or Mesh-TF's frontier of its restricted space), or the
    reason it has none (a space with no configuration for some op)."""
    papers = RestrictedOptions(runnable=False)      # the baselines as the papers have them
    makers = {"data-parallel": lambda: [baselines.data_parallel(ctx)],
              "optcnn": lambda: [replace(additive_min_time(front), algorithm="optcnn")],
              "tofu-like": lambda: [baselines.tofu_like(ctx, papers)],
              "mesh-tf": lambda: list(baselines.mesh_tf_frontier(ctx)),
              "owt": lambda: [baselines.owt(ctx)],
              "model-parallel": lambda: [baselines.model_parallel(ctx)]}
    return {name: _attempt(makers[name]) for name in names}


def additive_min_time(front) -> Plan:
    """OptCNN's single objective: the least additive time (the frontier's fastest end as drawn)."""
    return min(front, key=lambda p: (p.additive_time_s, p.additive_memory_bytes))


def _attempt(make) -> list[Plan] | str:
    try:
        return make()
    except (StratagemError, ValueError, KeyError) as error:      # a baseline the space cannot express
        return f"{type(error).__name__}: {error}"


def baseline_points(ctx, front, names: Sequence[str] = BASELINE_ORDER):
    """(name -> FrontierPoints of the baselines that were built, name -> why the others were not)."""
    made, failed = {}, {}
    for name, plans in baseline_plans(ctx, front, names).items():
        if isinstance(plans, str):
            failed[name] = plans
        else:
            made[name] = tuple(frontier_points(plans, ctx.model))
    return made, failed


def frontier_table(points: Sequence[FrontierPoint], title: str = "") -> Table:
    rows = [(str(i), format_bytes(p.additive_memory_bytes), format_seconds(p.additive_time_s),
             format_seconds(p.compute_time_s), format_seconds(p.network_time_s),
             format_bytes(p.peak_memory_bytes), format_seconds(p.iteration_time_s))
            for i, p in enumerate(points)]
    return Table.of(("#", "memory (additive)", "time (additive)", "compute", "network",
                     "peak memory (simulated)", "iteration (simulated)"), rows, title)


def write_frontier_png(points: Sequence[FrontierPoint], baselines: Mapping[str, Sequence[FrontierPoint]],
                       path: str | Path, title: str = "", memory_cap_bytes: float | None = None,
                       axes=None) -> Path | None:
    """One panel; with `axes` given, draw into it and leave saving to the caller."""
    plt = pyplot()
    figure = None
    if axes is None:
        figure, axes = plt.subplots(figsize=(6.4, 4.4))
    draw_frontier(axes, points, baselines, memory_cap_bytes)
    axes.set_title(title, fontsize=10)
    return save(figure, path) if figure is not None else None


def draw_frontier(axes, points: Sequence[FrontierPoint], baselines: Mapping[str, Sequence[FrontierPoint]],
                  memory_cap_bytes: float | None = None) -> None:
    scale, unit = memory_unit(max(p.additive_memory_bytes for p in points))
    mem = [p.additive_memory_bytes / scale for p in points]
    axes.plot(mem, [p.additive_time_s for p in points], "-o", color="C0", ms=3, label="frontier (FT)")
    axes.plot(mem, [p.compute_time_s for p in points], ":", color="C0", label="  compute time")
    axes.plot(mem, [p.network_time_s for p in points], ":", color="C3", label="  network time")
    axes.plot([p.peak_memory_bytes / scale for p in points], [p.iteration_time_s for p in points], "o",
              mfc="none", color="C7", ms=4, label="frontier, simulated")
    markers = {"data-parallel": "s", "optcnn": "^", "tofu-like": "D", "mesh-tf": "v", "owt": "P",
               "model-parallel": "X"}
    for i, (name, group) in enumerate(baselines.items()):
        if not group:
            continue
        xs = [p.additive_memory_bytes / scale for p in group]
        ys = [p.additive_time_s for p in group]
        style = "--" if len(group) > 1 else ""
        axes.plot(xs, ys, style + markers.get(name, "o"), color=f"C{i + 1}", ms=6,
                  label=BASELINE_LABELS.get(name, name))
        axes.annotate(BASELINE_LABELS.get(name, name), (xs[-1], ys[-1]), textcoords="offset points",
                      xytext=(4, 4), fontsize=7)
    if memory_cap_bytes and memory_cap_bytes <= 2 * max(p.additive_memory_bytes for p in points):
        axes.axvline(memory_cap_bytes / scale, color="k", lw=0.8, ls="--", label="memory cap")
    axes.set_xlabel(f"peak memory per device ({unit})")
    axes.set_ylabel("iteration time (s)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7)


def memory_unit(largest_bytes: float) -> tuple[float, str]:
    """GiB, or MiB / KiB for small models, so that the axis reads in plain numbers."""
    for scale, unit in ((GiB, "GiB"), (2 ** 20, "MiB")):
        if largest_bytes >= scale / 2:
            return scale, unit
    return 2 ** 10, "KiB"
