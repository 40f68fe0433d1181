"""TensorOpt (Cai et al., TPDS 2021) §5 on the simulated v100-2x8 (2 nodes x 8 V100 16 GB):

    tensoropt-fig6    frontiers of RNN, WideResNet and Transformer at 16 GPUs, with Data Parallel,
                      OptCNN, ToFu and the Mesh-TensorFlow frontier                  `fig6`
    tensoropt-fig7    Transformer frontiers: hidden size; cross-machine bandwidth x0.5 / x1 / x4;
                      NVLink against PCIe inside one 8-GPU machine                  `fig7`
    tensoropt-fig8    GPUs against the least per-iteration time that fits 16 GB / 1.1, WideResNet
                      and Transformer: TensorOpt, Data Parallel, OptCNN, ToFu        `fig8`
    tensoropt-table3  running time of FT at 16 GPUs, with 2 threads and with 1      `table3`
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from stratagem.report.reproduce.common import (
    POINT_COLUMNS, Outcome, Settings, cluster_variant, cross_node_bus_bandwidth, frontier_and_points,
    gib, knee_index, points_rows, scale_network, seconds, transformer_graph, zoo_graph,
)
from stratagem.cluster import load
from stratagem.search.context import context
from stratagem.report.frontier_plot import baseline_points, draw_frontier
from stratagem.report.plots import pyplot, save
from stratagem.report.tables import Table
from stratagem.search import baselines
from stratagem.search.baselines import RestrictedOptions
from stratagem.search.context import memory_cap
from stratagem.search.ft import frontier_tracking
from stratagem.search.ft_search import PLANNER_FT
from stratagem.search.space import build_search_space

CLUSTER = "v100-2x8"
PAPER_DP_RNN = "TensorOpt §5.1: Data Parallel on RNN takes 109 GB and 39 s per iteration"


# ---- Fig. 6 --------------------------------------------------------------------------------------

def fig6(settings: Settings) -> Outcome:
    models = ("rnn-tiny", "transformer-tiny") if settings.quick else ("rnn", "wideresnet", "transformer")
    devices = 2 if settings.quick else 16
    cluster = load(CLUSTER)
    panels, summary, rows, notes = {}, [], [], []
    for name in settings.track(models, "models"):
        ctx = context(zoo_graph(name), cluster, devices)
        front, points = frontier_and_points(ctx)
        base, failed = baseline_points(ctx, front)
        notes += [f"{name}, {key}: not built ({why})" for key, why in failed.items()]
        panels[name] = (points, drawn_baselines(name, base))
        summary += fig6_summary(name, points, base)
        rows += points_rows(f"{name} FT", points)
        for key, series in base.items():
            rows += points_rows(f"{name} {key}", series)
        notes += fig6_observations(name, points, base)
    cap = memory_cap(cluster, devices)

    def draw(path):
        return draw_panels(path, panels, cap, f"{CLUSTER}, {devices} GPUs")
    columns = ("model", "series", "plans", "least memory GiB", "its time s", "least time s", "its memory GiB",
               "turning point GiB", "its time s")
    notes.append("as in the paper, RNN's Data Parallel point is in the tables but not drawn (it would squeeze the panel)")
    return Outcome((Table.of(columns, summary, f"Frontiers at {devices} GPUs (additive costs, TensorOpt Eq. 3)"),
                    Table.of(POINT_COLUMNS, rows, "Every plan drawn")), tuple(notes), draw)


def drawn_baselines(model: str, baselines):
    """As the paper: RNN's Data Parallel (109 GB, 39 s there) is left off the plot, kept in the tables."""
    return {k: v for k, v in baselines.items() if not (model == "rnn" and k == "data-parallel")}


def fig6_summary(model: str, points, baselines) -> list[tuple[str, ...]]:
    rows = [_series_row(model, "TensorOpt (FT)", points, with_knee=True)]
    labels = {"data-parallel": "Data Parallel", "optcnn": "OptCNN", "tofu-like": "ToFu", "mesh-tf": "Mesh-TF"}
    rows += [_series_row(model, labels.get(k, k), v, with_knee=False) for k, v in baselines.items()]
    return rows


def _series_row(model: str, label: str, points, with_knee: bool) -> tuple[str, ...]:
    least_mem = min(points, key=lambda p: (p.additive_memory_bytes, p.additive_time_s))
    least_time = min(points, key=lambda p: (p.additive_time_s, p.additive_memory_bytes))
    knee = ("-", "-")
    if with_knee and len(points) > 2:
        k = points[knee_index([p.additive_memory_bytes for p in points], [p.additive_time_s for p in points])]
        knee = (gib(k.additive_memory_bytes), seconds(k.additive_time_s))
    return (model, label, str(len(points)), gib(least_mem.additive_memory_bytes), seconds(least_mem.additive_time_s),
            seconds(least_time.additive_time_s), gib(least_time.additive_memory_bytes), *knee)


def dominated(point, frontier) -> bool:
    return any(p.additive_memory_bytes <= point.additive_memory_bytes and p.additive_time_s <= point.additive_time_s
               and (p.additive_memory_bytes, p.additive_time_s) != (point.additive_memory_bytes, point.additive_time_s)
               for p in frontier)


def fig6_observations(model: str, points, baselines) -> list[str]:
    notes = []
    ft_min = min(p.additive_memory_bytes for p in points)
    ft_fast = min(points, key=lambda p: p.additive_time_s)
    for key, series in baselines.items():
        if not series:
            continue
        below = sum(dominated(p, points) for p in series)
        fastest = min(series, key=lambda p: p.additive_time_s)
        leanest = min(p.additive_memory_bytes for p in series)
        notes.append(f"{model}, {key}: {below} of {len(series)} point(s) dominated by the FT frontier; least memory "
                     f"{gib(leanest)} GiB (FT: {gib(ft_min)}), least time {seconds(fastest.additive_time_s)} s "
                     f"(FT: {seconds(ft_fast.additive_time_s)})")
    return notes


def draw_panels(path, panels, cap: float, subtitle: str):
    plt = pyplot()
    figure, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    for ax, (name, (points, base)) in zip(axes[0], panels.items()):
        draw_frontier(ax, points, base, cap)
        ax.set_title(f"{name} ({subtitle})", fontsize=10)
    return save(figure, path)


# ---- Fig. 7 --------------------------------------------------------------------------------------

def fig7_models(quick: bool):
    """(label, graph builder) per hidden size; TensorOpt sizes its Transformer by the hidden size."""
    if quick:
        return [(f"d{d}", lambda d=d: transformer_graph(d, 2, layers=1, vocab=50, length=8, batch=16))
                for d in (16, 32)]
    return [(f"d{d} ({d // 128} heads)", lambda d=d: transformer_graph(d, d // 128)) for d in (1536, 2688, 3840, 4608)]


def fig7_clusters(quick: bool):
    """(label, cluster) for panel b (16 GPUs) and panel c (8 GPUs on one machine)."""
    def four_nics(data):
        data["network"]["nics_per_node"] = 4
        data["network"]["attach"] = ["pcie.sw0", "pcie.sw1", "pcie.sw2", "pcie.sw3"]

    def one_node(data):
        data["nodes"] = 1
        data.pop("network")

    def pcie_only(data):
        one_node(data)
        data["fabrics"] = [f for f in data["fabrics"] if f["type"] != "mesh"]
    bandwidth = [("no RDMA (x0.5)", cluster_variant(CLUSTER, "v100-2x8-net0.5", scale_network(0.5))),
                 ("RDMA (x1)", cluster_variant(CLUSTER, "v100-2x8", lambda d: None)),
                 ("4x RDMA (4 NICs)", cluster_variant(CLUSTER, "v100-2x8-4nic", four_nics))]
    intra = [("NVLink", cluster_variant(CLUSTER, "v100-1x8", one_node)),
             ("PCIe", cluster_variant(CLUSTER, "v100-1x8-pcie", pcie_only))]
    return bandwidth, intra


def fig7(settings: Settings) -> Outcome:
    quick = settings.quick
    devices, one_node = (2, 2) if quick else (16, 8)
    sizes = fig7_models(quick)
    bandwidth, intra = fig7_clusters(quick)
    base_graph = sizes[0][1]() if quick else zoo_graph("transformer")
    jobs = [("a: hidden size", label, build, load(CLUSTER), devices) for label, build in sizes]
    jobs += [("b: cross-machine bandwidth", label, lambda: base_graph, c, devices) for label, c in bandwidth]
    jobs += [("c: 8 GPUs, intra-machine links", label, lambda: base_graph, c, one_node) for label, c in intra]
    panels: dict[str, dict[str, tuple]] = {}
    rows, summary = [], []
    for panel, label, build, cluster, n in settings.track(jobs, "frontiers"):
        _, points = frontier_and_points(context(build(), cluster, n))
        panels.setdefault(panel, {})[label] = points
        rows += points_rows(f"{panel} / {label}", points)
        summary.append((panel, *_series_row("transformer", label, points, with_knee=True)[1:]))
    notes = [f"{label}: all-reduce bus bandwidth over all {c.num_devices} GPUs {cross_node_bus_bandwidth(c) / 1e9:.1f} GB/s"
             for label, c in bandwidth + intra]
    columns = ("panel", "series", "plans", "least memory GiB", "its time s", "least time s", "its memory GiB",
               "turning point GiB", "its time s")
    return Outcome((Table.of(columns, summary, "Transformer frontiers (additive costs)"),
                    Table.of(POINT_COLUMNS, rows, "Every plan drawn")), tuple(notes),
                   lambda path: draw_series_panels(path, panels))


def draw_series_panels(path, panels):
    plt = pyplot()
    figure, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    for ax, (title, series) in zip(axes[0], panels.items()):
        for i, (label, points) in enumerate(series.items()):
            mem = [p.additive_memory_bytes / 2 ** 30 for p in points]
            ax.plot(mem, [p.additive_time_s for p in points], "-o", ms=3, color=f"C{i}", label=label)
            ax.plot(mem, [p.network_time_s for p in points], ":", color=f"C{i}")
        ax.set_title(f"({title})", fontsize=10)
        ax.set_xlabel("peak memory per device (GiB)")
        ax.set_ylabel("iteration time (s); dotted: network time")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return save(figure, path)


# ---- Fig. 8 --------------------------------------------------------------------------------------

def fig8(settings: Settings) -> Outcome:
    models = ("transformer-tiny",) if settings.quick else ("wideresnet", "transformer")
    counts = (1, 2) if settings.quick else (1, 2, 4, 8, 16)
    cluster = load(CLUSTER)
    jobs = [(m, n) for m in models for n in counts]
    rows, curves = [], {}
    for model, n in settings.track(jobs, "model x GPUs"):
        for method, found in least_times(zoo_graph(model), cluster, n).items():
            curves.setdefault(model, {}).setdefault(method, []).append((n, found))
            rows.append((model, str(n), method, seconds(found.time_s), gib(found.peak_memory_bytes),
                         gib(found.additive_memory_bytes), found.verdict))
    cap = 16 * 2 ** 30 / 1.1
    table = Table.of(("model", "GPUs", "method", "time s (simulated)", "peak memory GiB (simulated)",
                      "memory GiB (Eq. 3)", "fits"), rows,
                     f"Least per-iteration time that fits {gib(cap)} GiB per GPU")
    return Outcome((table,), ("TensorOpt: the fastest frontier plan whose simulated peak memory fits (mini-time); "
                              "where none does, the fastest whose Eq. 3 memory fits (what TensorOpt's own "
                              "estimate would run); else the least-memory plan. Data Parallel, OptCNN (the "
                              "frontier's fastest end) and ToFu (FT without replication, fastest end) are single "
                              "plans that run only if they fit",
                              "fits: simulated (the simulator's peak memory fits), Eq. 3 only (only the additive "
                              "estimate fits), no; the figure draws them as filled, hollow and x markers"),
                   lambda path: draw_fig8(path, curves))


@dataclass(frozen=True)
class Fit:
    time_s: float                   # simulated
    peak_memory_bytes: float        # simulated
    additive_memory_bytes: float    # TensorOpt Eq. 3
    cap_bytes: float

    @property
    def verdict(self) -> str:
        if self.peak_memory_bytes <= self.cap_bytes:
            return "simulated"
        return "Eq. 3 only" if self.additive_memory_bytes <= self.cap_bytes else "no"

    @staticmethod
    def of(plan, cap_bytes: float) -> "Fit":
        return Fit(plan.iteration_time_s, plan.peak_memory_bytes, plan.additive_memory_bytes, cap_bytes)


def tensoropt_choice(front, cap_bytes: float):
    """mini-time by simulated memory; else by the Eq. 3 memory; else the least memory."""
    for key in ("peak_memory_bytes", "additive_memory_bytes"):
        fitting = [p for p in front if getattr(p, key) <= cap_bytes]
        if fitting:
            return min(fitting, key=lambda p: (p.iteration_time_s, p.peak_memory_bytes))
    return front.min_memory


def least_times(graph, cluster, devices: int) -> dict[str, Fit]:
    ctx = context(graph, cluster, devices)
    cap = ctx.memory_cap_bytes
    front, _ = frontier_and_points(ctx)
    plans = {"TensorOpt": tensoropt_choice(front, cap), "Data Parallel": baselines.data_parallel(ctx),
             "OptCNN": front.min_time, "ToFu": baselines.tofu_like(ctx, RestrictedOptions(runnable=False))}
    return {label: Fit.of(plan, cap) for label, plan in plans.items()}


def draw_fig8(path, curves):
    plt = pyplot()
    figure, axes = plt.subplots(1, len(curves), figsize=(5.2 * len(curves), 4.0), squeeze=False)
    styles = {"simulated": {}, "Eq. 3 only": {"mfc": "none"}, "no": {"marker": "x"}}
    for ax, (model, methods) in zip(axes[0], curves.items()):
        for i, (method, values) in enumerate(methods.items()):
            ax.plot([n for n, _ in values], [f.time_s for _, f in values], "-", color=f"C{i}", lw=0.8, alpha=0.6,
                    label=method)
            for n, found in values:
                ax.plot([n], [found.time_s], **{"marker": "o", "color": f"C{i}", "ms": 6, **styles[found.verdict]})
        ax.set_xscale("log", base=2)
        ax.set_xlabel("GPUs")
        ax.set_ylabel("iteration time (s, simulated)")
        ax.set_title(f"{model}: filled fits, hollow fits by Eq. 3 only, x does not fit", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return save(figure, path)


# ---- Table 3 -------------------------------------------------------------------------------------

PAPER_TABLE3 = {"wideresnet": ("1,292", "17,432", "19,666"), "rnn": ("0.28", "0.40", "1.78"),
                "transformer": ("201", "1,535", "3,030")}


def table3(settings: Settings) -> Outcome:
    models = ("rnn-tiny",) if settings.quick else ("wideresnet", "rnn", "transformer")
    rows = []
    for name in settings.track(models, "models"):
        rows.append(ft_running_time(name, 4 if settings.quick else 16))
    columns = ("model", "ops", "groups", "FT s (2 threads)", "FT s (1 thread)", "cost tables s",
               "paper FT-LDP s", "paper no multi-thread s", "paper FT-Elimination s")
    return Outcome((Table.of(columns, rows, "FT running time at 16 GPUs (least of 3 runs)"),),
                   ("measured as benchmarks/ft_speed.py does: FT alone on the built cost tables (what Table 3 "
                    "times), and building those tables from the cost model",
                    "the paper ran on a 48-core Xeon 8160; these ran on the machine named in docs/results/README.md",
                    "FT here is the planner's (frontiers thinned to 16 tuples, long-range hubs fixed first); "
                    "there is no FT-Elimination variant to time"))


def ft_running_time(name: str, devices: int) -> tuple[str, ...]:
    graph = zoo_graph(name)
    ctx = context(graph, CLUSTER, devices)
    start = time.perf_counter()
    space = build_search_space(ctx.model)
    tables_s = time.perf_counter() - start
    timings = {}
    for workers in (2, 1):
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            frontier_tracking(space.problem, replace(PLANNER_FT, workers=workers))
            runs.append(time.perf_counter() - start)
        timings[workers] = min(runs)
    paper = PAPER_TABLE3.get(name, ("-", "-", "-"))
    return (name, str(len(graph.ops)), str(len(space.groups)), f"{timings[2]:.2f}", f"{timings[1]:.2f}",
            f"{tables_s:.1f}", *paper)


REPRODUCTIONS = (
    ("tensoropt-fig6", "TensorOpt Fig. 6: cost frontiers with the baselines",
     "frontiers of RNN, WideResNet and Transformer on 16 V100", fig6),
    ("tensoropt-fig7", "TensorOpt Fig. 7: what moves the Transformer's frontier",
     "model size, cross-machine bandwidth, NVLink against PCIe", fig7),
    ("tensoropt-fig8", "TensorOpt Fig. 8: GPUs against the least per-iteration time",
     "least time that fits at 1-16 GPUs", fig8),
    ("tensoropt-table3", "TensorOpt Table 3: running time of FT", "FT running time at 16 GPUs", table3),
)
