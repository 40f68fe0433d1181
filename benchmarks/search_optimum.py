"""FlexFlow §8.3: the exhaustive optimum of LeNet and RNNLM-2 at 4 P100s, and how fast MCMC finds it.

    PYTHONPATH=. python benchmarks/search_optimum.py [--seeds 5] [--budget 1] [--full]

Per model and space: the space's size, the exhaustive search's optimum, wall time, nodes and
strategies simulated; then MCMC (FlexFlow's initial candidates: data parallel, expert, one random;
`--budget` seconds) over `--seeds` seeds: how many reach the optimum, their worst relative gap,
and the search time until each found its best (`MCMCResult.time_to_best_s`). `--full` adds
LeNet's uncoarsened SOAP space (8.1e17 strategies, about two minutes of exhaustive search).
"""

from __future__ import annotations

import argparse
import warnings

from stratagem import zoo
from stratagem.search.exhaustive import exhaustive_search
from stratagem.search.mcmc import MCMCOptions, build_space, mcmc_search
from stratagem.search.context import context
from stratagem.space import SpaceOptions

CASES = [("lenet", "coarsened, whole SOAP space", SpaceOptions(), True),
         ("rnnlm-2", "coarsened, all devices, 1 axis",
          SpaceOptions(max_axes=1, allow_fewer_devices=False), True),
         ("rnnlm-2", "coarsened, all devices, 2 axes, no reduction splits",
          SpaceOptions(max_axes=2, allow_fewer_devices=False, allow_reduction=False), True)]
FULL = [("lenet", "every op, whole SOAP space", SpaceOptions(), False)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget", type=float, default=1.0)
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--max-time", type=float, default=3600.0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    for name, label, options, coarsen in CASES + (FULL if args.full else []):
        ctx = context(zoo.build(name), "p100-4x4", devices=4)
        space = build_space(ctx, options, coarsen)
        exact = exhaustive_search(ctx, space, max_time_s=args.max_time)
        print(f"{name} [{label}]: {space.size_text} strategies; exhaustive optimum "
              f"{exact.time_s * 1e3:.4f} ms in {exact.elapsed_s:.1f} s ({exact.nodes} nodes, "
              f"{exact.leaves} strategies simulated)", flush=True)
        gaps, found_at = [], []
        for seed in range(args.seeds):
            result = mcmc_search(ctx, space, MCMCOptions(budget_s=args.budget, seed=seed))
            gaps.append(result.best.time_s / exact.time_s - 1)
            found_at.append(result.time_to_best_s)
        hits = sum(gap <= 1e-12 for gap in gaps)
        print(f"  MCMC {args.budget:g} s x {args.seeds} seeds: optimum reached by {hits}, worst gap "
              f"{max(gaps):.2e}, best found after {', '.join(f'{t:.2f}' for t in found_at)} s", flush=True)


if __name__ == "__main__":
    main()
