"""FlexFlow Fig. 6 / Fig. 9b and Table 5 on stratagem's simulator: searches compared, and MCMC's
search time with full against delta simulation.

    PYTHONPATH=. python benchmarks/compare_searches.py [--quick] [--budget 10] [--models ...]

Table 1, per model, cluster and device count: simulated per-iteration time (ms) of data parallel,
the expert strategy, MCMC (FlexFlow's initial candidates, `--budget` seconds), Frontier Tracking's
min-time end and Tofu; the models take FlexFlow's per-GPU batch (Table 4), so the global batch
grows with the devices, as in Fig. 6.
Table 2 (Table 5): the same MCMC chain (seed 0, `--proposals` per initial candidate) with
`Simulation(...).run()`-style full simulation of every proposal and with delta simulation
(`Simulation.change`), its wall time and the speedup.
`--quick`: 4 and 16 devices on p100-4x4 only, a 3 s budget, 100 proposals.
"""

from __future__ import annotations

import argparse
import time
import warnings

from stratagem import zoo
from stratagem.errors import StratagemError
from stratagem.search.mcmc import MCMCOptions, build_space, mcmc_search
from stratagem.search.context import context
from stratagem.search.planner import search

MODELS = ("alexnet", "inception-v3", "resnet-101", "rnntc", "rnnlm", "nmt")
SETUPS = (("p100-4x4", (4, 8, 16)), ("k80-16x4", (4, 8, 16, 32, 64)))
QUICK_SETUPS = (("p100-4x4", (4, 16)),)
ALGORITHMS = ("data-parallel", "expert", "mcmc", "ft", "tofu")


def graph_for(name: str, devices: int):
    per_gpu = zoo.info(name).batch_size
    return zoo.build(name, batch_size=per_gpu * devices)


def per_iteration_row(graph, cluster: str, devices: int, budget_s: float) -> list[str]:
    cells = []
    for algorithm in ALGORITHMS:
        kwargs = {"budget_s": budget_s, "seed": 0} if algorithm == "mcmc" else {}
        if algorithm in ("mcmc", "ft", "tofu"):
            kwargs["runnable"] = False          # the papers' whole spaces, halos and sub-blocks too
        began = time.perf_counter()
        try:
            plan = search(graph, cluster, algorithm=algorithm, devices=devices, **kwargs)
            cells.append(f"{plan.iteration_time_s * 1e3:8.2f} ({time.perf_counter() - began:5.1f}s)")
        except StratagemError as error:
            cells.append(f"{type(error).__name__:>17s}")
    return cells


def full_versus_delta(graph, cluster: str, devices: int, proposals: int) -> list[str]:
    ctx = context(graph, cluster, devices)
    space = build_space(ctx)
    times = {}
    for mode in ("delta", "full", "delta"):        # the first run fills the cost model's memo
        result = mcmc_search(ctx, space, MCMCOptions(budget_s=None, max_proposals=proposals, seed=0,
                                                     simulation=mode))
        times[mode] = (result.search_time_s, result.proposals_per_s, result.best.time_s)
    assert abs(times["full"][2] - times["delta"][2]) <= 1e-9 * times["full"][2], "the chains differ"
    return [f"{times['full'][0]:7.2f}", f"{times['delta'][0]:7.2f}", f"{times['full'][0] / times['delta'][0]:5.2f}x",
            f"{times['full'][1]:7.0f}", f"{times['delta'][1]:7.0f}"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--budget", type=float, default=None, help="MCMC seconds (default 10, quick 3)")
    parser.add_argument("--proposals", type=int, default=None, help="per candidate for Table 2 (300, quick 100)")
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--skip-table1", action="store_true")
    parser.add_argument("--skip-table2", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    budget = args.budget or (3.0 if args.quick else 10.0)
    proposals = args.proposals or (100 if args.quick else 300)
    setups = QUICK_SETUPS if args.quick else SETUPS
    if not args.skip_table1:
        print(f"Table 1: simulated per-iteration time, ms (search wall time); MCMC budget {budget:g} s")
        print(f"{'model':14s} {'cluster':9s} {'N':>3s} " + " ".join(f"{a:>17s}" for a in ALGORITHMS), flush=True)
        for name in args.models:
            for cluster, counts in setups:
                for n in counts:
                    graph = graph_for(name, n)
                    row = per_iteration_row(graph, cluster, n, budget)
                    print(f"{name:14s} {cluster:9s} {n:3d} " + " ".join(f"{c:>17s}" for c in row), flush=True)
    if not args.skip_table2:
        print(f"\nTable 2: MCMC search time, full vs delta simulation ({proposals} proposals per candidate, "
              f"same chain); s, and proposals/s")
        print(f"{'model':14s} {'cluster':9s} {'N':>3s} {'full s':>7s} {'delta s':>7s} {'speedup':>6s} "
              f"{'full/s':>7s} {'delta/s':>7s}", flush=True)
        for name in args.models:
            for cluster, counts in setups:
                for n in counts:
                    row = full_versus_delta(graph_for(name, n), cluster, n, proposals)
                    print(f"{name:14s} {cluster:9s} {n:3d} " + " ".join(row), flush=True)


if __name__ == "__main__":
    main()
