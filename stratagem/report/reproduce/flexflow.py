"""FlexFlow (Jia et al., SysML 2019) §8 on the simulated p100-4x4 and k80-16x4:

    flexflow-fig6    per-iteration throughput of data parallelism, the expert strategy and
                     FlexFlow's MCMC for its six DNNs at 1-16 P100 and 1-64 K80 (per-GPU batch 64,
                     AlexNet 256: the global batch grows with the GPUs)                    `fig6`
    flexflow-table5  MCMC search time with full against delta simulation, a fixed number of
                     proposals (100 per candidate), 4-16 K80 (the paper: to its stopping rule,
                     4-64; 32 and 64 take hours with full simulation)                    `table5`
    flexflow-fig9b   FlexFlow (MCMC) against OptCNN (the min-time end of FT's frontier) on 16 P100
                                                                                          `fig9b`
All three run `search(..., algorithm="mcmc")` (and "expert"), 10 s of MCMC per search (FlexFlow:
a 30-minute budget, usually stopping in minutes); until those are registered in
`search.registry` the reproductions are written as pending.
"""

from __future__ import annotations

import time
from dataclasses import replace

from stratagem.ir import Role
from stratagem.report.frontier_plot import additive_min_time
from stratagem.report.plots import pyplot, save
from stratagem.report.reproduce.common import Outcome, Settings, frontier_and_points, seconds, zoo_graph
from stratagem.search.context import context
from stratagem.report.tables import Table
from stratagem.search.context import NothingFits
from stratagem.search.planner import search
import numpy as np

MODELS = ("alexnet", "inception-v3", "resnet-101", "rnntc", "rnnlm", "nmt")
PER_GPU_BATCH = {"alexnet": 256}
CLUSTERS = {"p100-4x4": (1, 2, 4, 8, 16), "k80-16x4": (1, 2, 4, 8, 16, 32, 64)}
QUICK_CLUSTERS = {"p100-4x4": (1, 2)}


def graph_at(model: str, gpus: int, quick: bool):
    """Weak scaling as FlexFlow measured: the per-GPU batch times the GPUs."""
    if quick:
        return zoo_graph(f"{model}-tiny")
    from stratagem import zoo
    return zoo.build(model, batch_size=PER_GPU_BATCH.get(model, 64) * gpus)


def _search(graph, cluster: str, gpus: int, algorithm: str, **options):
    """The plan, or None where the search finds nothing that fits the memory cap."""
    if algorithm in WHOLE_SPACE:
        options = {"runnable": False, **options}           # the paper's whole space
    try:
        return search(graph, cluster, algorithm, devices=gpus, **options)
    except NothingFits:
        return None


WHOLE_SPACE = ("mcmc", "tofu", "ft", "exhaustive")     # searches that otherwise keep to what the runtime runs


def optcnn(graph, cluster: str, gpus: int):
    """OptCNN's single objective: the least additive time of FT's frontier (TensorOpt §5.1)."""

    front, _ = frontier_and_points(context(graph, cluster, gpus))
    return replace(additive_min_time(front), algorithm="optcnn")


def label(model: str, quick: bool) -> str:
    return f"{model}-tiny" if quick else model


def mcmc_budget_s(quick: bool) -> float:
    return 0.5 if quick else 10.0


def fig6(settings: Settings) -> Outcome:
    models = ("rnnlm",) if settings.quick else MODELS
    clusters = QUICK_CLUSTERS if settings.quick else CLUSTERS
    jobs = [(m, c, n) for m in models for c, counts in clusters.items() for n in counts]
    rows, curves = [], {}
    for model, cluster, n in settings.track(jobs, "model x cluster x GPUs"):
        graph = graph_at(model, n, settings.quick)
        batch = graph_batch(graph)
        for method, algorithm, options in (("data parallel", "data-parallel", {}), ("expert", "expert", {}),
                                           ("FlexFlow (MCMC)", "mcmc", {"budget_s": mcmc_budget_s(settings.quick)})):
            plan = _search(graph, cluster, n, algorithm, **options)
            if plan is None:
                rows.append((label(model, settings.quick), cluster, str(n), method, "nothing fits", "-"))
                continue
            throughput = batch / plan.iteration_time_s
            curves.setdefault((label(model, settings.quick), cluster), {}).setdefault(method, []).append((n, throughput))
            rows.append((label(model, settings.quick), cluster, str(n), method, seconds(plan.iteration_time_s),
                         f"{throughput:.1f}"))
    table = Table.of(("model", "cluster", "GPUs", "method", "iteration s (simulated)", "samples/s"), rows,
                     "Per-iteration training throughput")
    return Outcome((table,), (f"MCMC budget {mcmc_budget_s(settings.quick):.0f} s per search (FlexFlow: 30 min), "
                              "initial candidates data parallel, expert and random",),
                   lambda path: draw_throughput(path, curves))


def graph_batch(graph) -> int:
    inputs = [t for t in graph.tensors.values() if t.role is Role.INPUT and t.shape]
    return int(inputs[0].shape[0]) if inputs else 1


def draw_throughput(path, curves):
    plt = pyplot()
    figure, axes = plt.subplots(1, len(curves), figsize=(3.6 * len(curves), 3.4), squeeze=False)
    for ax, ((model, cluster), methods) in zip(axes[0], curves.items()):
        for i, (method, values) in enumerate(methods.items()):
            ax.plot([n for n, _ in values], [t for _, t in values], "-o", ms=3, color=f"C{i}", label=method)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{model}, {cluster}", fontsize=9)
        ax.set_xlabel("GPUs")
        ax.set_ylabel("samples/s")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    return save(figure, path)


# FlexFlow Table 5: (model, GPUs) -> (full s, delta s)
_TABLE5_ROWS = {4: ("0.11 0.04", "1.4 0.4", "14 4.1", "16 7.5", "21 9.2", "40 16"),
                8: ("0.40 0.13", "4.5 1.4", "66 17", "91 39", "76 31", "178 65"),
                16: ("1.4 0.48", "22 7.3", "388 77", "404 170", "327 121", "998 328"),
                32: ("5.3 1.8", "107 33", "1746 298", "1358 516", "1102 342", "2698 701"),
                64: ("18 5.9", "515 158", "8817 1278", "4404 1489", "3406 969", "8982 2190")}
_TABLE5_MODELS = ("alexnet", "resnet-101", "inception-v3", "rnntc", "rnnlm", "nmt")
PAPER_TABLE5 = {(m, n): tuple(cell.split()) for n, cells in _TABLE5_ROWS.items()
                for m, cell in zip(_TABLE5_MODELS, cells)}
# full: every proposal simulated from scratch; delta: FlexFlow's Algorithm 2 re-timing;
# incremental: the task graph edited in place and re-timed by Algorithm 1 (the MCMC default)
SIMULATIONS = ("full", "delta", "incremental")


def table5(settings: Settings) -> Outcome:
    models = ("rnnlm",) if settings.quick else MODELS
    counts = (2,) if settings.quick else (4, 8, 16)
    proposals = 20 if settings.quick else 100
    rows = []
    for model, n in settings.track([(m, n) for m in models for n in counts], "model x GPUs"):
        graph = graph_at(model, n, settings.quick)
        timings = {}
        for simulation in SIMULATIONS:
            start = time.perf_counter()
            _search(graph, "k80-16x4", n, "mcmc", budget_s=None, max_proposals=proposals, simulation=simulation,
                    seed=0)
            timings[simulation] = time.perf_counter() - start
        paper = PAPER_TABLE5.get((model, n), ("-", "-"))
        rows.append((label(model, settings.quick), str(n), *(f"{timings[s]:.2f}" for s in SIMULATIONS),
                     f"{timings['full'] / timings['delta']:.1f}x", f"{timings['full'] / timings['incremental']:.1f}x",
                     *paper))
    table = Table.of(("model", "GPUs", "full s", "delta s", "incremental s", "speed-up (delta)",
                      "speed-up (incremental)", "paper full s", "paper delta s"), rows,
                     f"MCMC search time, {proposals} proposals per initial candidate, k80-16x4")
    return Outcome((table,), ("FlexFlow Table 5 times the whole search to its stopping rule; here every search "
                              "makes the same number of proposals from the same seed, so the ratio is the "
                              "simulators' alone",
                              "full, delta and incremental are `search(..., algorithm='mcmc', simulation=...)`"))


def fig9b(settings: Settings) -> Outcome:
    models = ("rnnlm",) if settings.quick else MODELS
    n = 2 if settings.quick else 16
    rows, bars = [], {}
    for model in settings.track(models, "models"):
        graph = graph_at(model, n, settings.quick)
        optcnn_plan = optcnn(graph, "p100-4x4", n)
        flexflow = _search(graph, "p100-4x4", n, "mcmc", budget_s=mcmc_budget_s(settings.quick))
        if flexflow is None:
            rows.append((label(model, settings.quick), seconds(optcnn_plan.iteration_time_s), "nothing fits", "-"))
            continue
        bars[label(model, settings.quick)] = (optcnn_plan.iteration_time_s, flexflow.iteration_time_s)
        rows.append((label(model, settings.quick), seconds(optcnn_plan.iteration_time_s),
                     seconds(flexflow.iteration_time_s),
                     f"{optcnn_plan.iteration_time_s / flexflow.iteration_time_s:.2f}x"))
    table = Table.of(("model", "OptCNN s", "FlexFlow s", "speed-up"), rows,
                     f"OptCNN against FlexFlow on {n} P100 (simulated iteration time)")
    return Outcome((table,), ("OptCNN here is the least additive time on FT's frontier (OptCNN minimizes its own "
                              "cost model; TensorOpt: it finds the fastest end of the frontier); both searches "
                              "over the paper's whole space",),
                   lambda path: draw_bars(path, bars, ("OptCNN", "FlexFlow"), "iteration time (s)"))


def draw_bars(path, bars, labels, ylabel):

    plt = pyplot()
    figure, ax = plt.subplots(figsize=(1.4 * len(bars) + 2, 3.4))
    x = np.arange(len(bars))
    width = 0.8 / len(labels)
    for i, label in enumerate(labels):
        ax.bar(x + i * width, [v[i] for v in bars.values()], width, label=label, color=f"C{i}")
    ax.set_xticks(x + width * (len(labels) - 1) / 2, list(bars), fontsize=8)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    return save(figure, path)


REPRODUCTIONS = (
    ("flexflow-fig6", "FlexFlow Fig. 6: per-iteration training performance", "throughput of six DNNs at 1-64 GPUs",
     fig6, ("mcmc", "expert")),
    ("flexflow-table5", "FlexFlow Table 5: search time with full and delta simulation",
     "MCMC with full against delta simulation", table5, ("mcmc",)),
    ("flexflow-fig9b", "FlexFlow Fig. 9b: FlexFlow against OptCNN on 16 P100", "MCMC against OptCNN", fig9b,
     ("mcmc",)),
)
