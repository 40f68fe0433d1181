"""Tofu (Wang et al., EuroSys 2019) §5.2 and §7.3 on the simulated k80-1x8 (8 K80 on PCIe):

    tofu-table1   time to search the best partition for 8 workers: Tofu's recursion on
                  WResNet-152 and RNN-10 (Tofu: 8.3 s and 66.6 s)                        `table1`
    tofu-fig10    partition algorithms on RNN-4-8K (batch 512) and WResNet-152-10 (batch 8) at 8
                  workers: AllRow-Greedy, Spartan-like largest-tensor-first, EqualChop (one dim
                  per tensor, by DP), ICML18 (no output reduction), Tofu: simulated time, its
                  compute part, bytes moved, peak memory                                   `fig10`
Tofu's recursion is `search(..., algorithm="tofu")`; where it is not registered the Tofu rows are
marked pending. EqualChop and ICML18 are the min-time ends of FT's frontier over the restricted
spaces (Tofu's DP and OptCNN's both minimize one objective).
"""

from __future__ import annotations

import time
from dataclasses import replace

from stratagem.cluster import load
from stratagem.report.plots import pyplot, save
from stratagem.report.reproduce.common import Outcome, Settings, gib, seconds, zoo_graph
from stratagem.search.context import context
from stratagem.report.reproduce.greedy import allrow_greedy, largest_first
from stratagem.report.tables import Table
from stratagem.search.context import make_plan
from stratagem.search.ft_search import FTSearchOptions, frontier
from stratagem.search.planner import search
from stratagem.search.registry import ALGORITHMS
from stratagem.space import SpaceOptions
import numpy as np
import warnings

CLUSTER = "k80-1x8"
WORKERS = 8
PAPER_TABLE1 = {"wresnet-152-10": "8.3", "rnn-10-8k": "66.6"}
EQUAL_CHOP = SpaceOptions(allow_fewer_devices=False, allow_replicate=False, max_axes=1)
ICML18 = SpaceOptions(allow_fewer_devices=False, allow_reduction=False, max_axes=2)


def has_tofu() -> bool:
    return "tofu" in ALGORITHMS


def table1(settings: Settings) -> Outcome:
    models = ("rnn-tiny",) if settings.quick else ("wresnet-152-10", "rnn-10-8k")
    workers = 2 if settings.quick else WORKERS
    rows = []
    for name in settings.track(models, "models"):
        graph = zoo_graph(name)
        start = time.perf_counter()
        plan = search(graph, CLUSTER, "tofu", devices=workers, runnable=False)
        search_s = time.perf_counter() - start
        rows.append((name, str(len(graph.ops)), f"{search_s:.1f}", PAPER_TABLE1.get(name, "-"),
                     seconds(plan.iteration_time_s)))
    return Outcome((Table.of(("model", "ops", "search s", "paper s", "plan's iteration s (simulated)"), rows,
                             f"Tofu's recursive search for {workers} workers on {CLUSTER}"),))


def fig10_graphs(quick: bool):
    if quick:
        return (("rnn-tiny", lambda: zoo_graph("rnn-tiny")),)
    return (("RNN-4-8K", rnn_4_8k), ("WResNet-152-10", lambda: _zoo_batch("wresnet-152-10", 8)))


def _zoo_batch(name: str, batch: int):

    from stratagem import zoo
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zoo.build(name, batch_size=batch)


def rnn_4_8k():
    """Tofu's RNN-4-8K: 4 LSTM layers of 8192, as the zoo's rnn-L-Hk (embedding 512, vocabulary 2,048,
    20 steps), batch 512."""

    import torch

    from stratagem.frontend.capture import capture
    from stratagem.frontend.zoo import inputs
    from stratagem.frontend.zoo.recurrent import LSTMLanguageModel
    meta = torch.device("meta")
    with meta:
        module = LSTMLanguageModel(2048, 512, 8192, 4)
    example = inputs.tokens(512, meta, None, vocab=2048, length=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return capture(module, example, name="rnn-4-8k")


def fig10_plans(ctx) -> dict[str, object]:
    """method -> Plan, or a string saying why there is none."""
    out: dict[str, object] = {
        "AllRow-Greedy": make_plan(ctx, allrow_greedy(ctx.model), "allrow-greedy"),
        "Spartan": make_plan(ctx, largest_first(ctx.model), "spartan-like"),
        "EqualChop": replace(papers_frontier(ctx, EQUAL_CHOP).min_time, algorithm="equal-chop"),
        "ICML18": replace(papers_frontier(ctx, ICML18).min_time, algorithm="icml18"),
    }
    out["Tofu"] = search(ctx.graph, ctx.cluster, "tofu", devices=ctx.num_devices, runnable=False) if has_tofu() else \
        "pending: search(..., algorithm='tofu') is not registered in search.registry yet"
    return out


def papers_frontier(ctx, space):
    """FT's frontier over a restricted space within the papers' whole space."""
    return frontier(ctx, FTSearchOptions(space=space, runnable=False))


def fig10(settings: Settings) -> Outcome:
    workers = 4 if settings.quick else WORKERS
    cluster = load(CLUSTER)
    rows, bars = [], {}
    for label, build in settings.track(fig10_graphs(settings.quick), "models"):
        ctx = context(build(), cluster, workers)
        cap = ctx.memory_cap_bytes
        for method, plan in fig10_plans(ctx).items():
            if isinstance(plan, str):
                rows.append((label, method, plan, "-", "-", "-", "-"))
                continue
            d = plan.details
            fits = "yes" if plan.peak_memory_bytes <= cap else "no (out of memory)"
            rows.append((label, method, seconds(plan.iteration_time_s), seconds(d["compute_time_s"]),
                         f"{d['communication_bytes'] / 1e9:.3g}", gib(plan.peak_memory_bytes), fits))
            bars.setdefault(label, {})[method] = (plan.iteration_time_s, d["compute_time_s"],
                                                  plan.peak_memory_bytes <= cap)
    table = Table.of(("model", "method", "iteration s (simulated)", "compute s (busiest GPU)", "GB moved",
                      "peak memory GiB", "fits (memory / 1.1)"), rows,
                     f"Partition algorithms at {workers} workers on {CLUSTER}")
    return Outcome((table,), ("compute s is the busiest GPU's compute (Tofu's light-colored bar part); the rest of "
                              "the iteration is communication not hidden behind it",),
                   lambda path: draw_fig10(path, bars))


def draw_fig10(path, bars):

    plt = pyplot()
    figure, axes = plt.subplots(1, len(bars), figsize=(4.6 * len(bars), 3.6), squeeze=False)
    for ax, (model, methods) in zip(axes[0], bars.items()):
        x = np.arange(len(methods))
        total = [v[0] for v in methods.values()]
        compute = [min(v[1], v[0]) for v in methods.values()]
        hatches = ["" if v[2] else "//" for v in methods.values()]
        ax.bar(x, total, color="C0", alpha=0.45, hatch=hatches, label="iteration")
        ax.bar(x, compute, color="C0", hatch=hatches, label="compute (busiest GPU)")
        ax.set_xticks(x, list(methods), fontsize=7, rotation=20)
        ax.set_ylabel("seconds per iteration (simulated)")
        ax.set_title(f"{model} (hatched: out of memory)", fontsize=10)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    return save(figure, path)


REPRODUCTIONS = (
    ("tofu-table1", "Tofu Table 1: time to search the best partition for 8 workers",
     "Tofu's recursive search time", table1, ("tofu",)),
    ("tofu-fig10", "Tofu Fig. 10: partition algorithms on RNN-4-8K and WResNet-152-10 at 8 workers",
     "partition algorithms compared", fig10),
)
