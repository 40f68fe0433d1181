"""Tofu's search time (Tofu Table 1: 8.3 s for WResNet-152 and 66.6 s for RNN-10 at 8 workers).

    PYTHONPATH=. python benchmarks/tofu_search_time.py [--workers 8] [--repeat 3] [models...]

Per model: ops, coarsened nodes, the recursion's wall time (median of --repeat runs on one
`Tofu` each, cold caches: a fresh cost model per run), Tofu's objective (total bytes) and the
per-step dims chosen for the first few nodes. Capture time is reported apart.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

from stratagem import zoo
from stratagem.search.context import context
from stratagem.search.tofu import Tofu

MODELS = ("wresnet-152-10", "rnn-10-8k")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*", default=list(MODELS))
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--cluster", default="k80-16x4")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print(f"{'model':16s} {'ops':>5s} {'nodes':>5s} {'capture s':>9s} {'search s':>8s} {'GB moved':>9s}  steps")
    for name in args.models:
        began = time.perf_counter()
        graph = zoo.build(name)
        capture_s = time.perf_counter() - began
        times, result, tofu = [], None, None
        for _ in range(args.repeat):
            ctx = context(graph, args.cluster, args.workers)
            began = time.perf_counter()
            tofu = Tofu(ctx.model)
            result = tofu.run(args.workers)
            times.append(time.perf_counter() - began)
        steps = " | ".join(",".join(str(d) for d in step.dims[:4]) for step in result.steps)
        print(f"{name:16s} {len(graph.ops):5d} {len(tofu.nodes):5d} {capture_s:9.1f} "
              f"{statistics.median(times):8.2f} {result.communication_bytes / 1e9:9.2f}  {steps}", flush=True)


if __name__ == "__main__":
    main()
