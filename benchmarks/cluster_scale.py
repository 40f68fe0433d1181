"""Clusters at scale: loading a cluster and pricing one collective over all of its devices.

    PYTHONPATH=. python benchmarks/cluster_scale.py [--repeat 3] [--kinds all_reduce,all_to_all] [clusters...]

Per cluster (default: the 16,384-GPU preset h100-2048x8-leafspine, with two switch levels and a
2:1 spine; the same 2,048 nodes on one non-blocking switch, h100-2048x8; and 100,000 H100s,
h100-12500x8): devices, directed links, the load time (file read, parse and the cluster's route
tables) and, per collective kind, the time to price it once over every device on a freshly
loaded cluster (nothing cached), with the price itself. Medians of --repeat runs, each in this
process after a first warm-up load (imports excluded). The issue's target: the 16,384-GPU cluster
loads in <= 1 s, and an all-reduce over all of it is priced in well under a second.
"""

from __future__ import annotations

import argparse
import statistics
import time

import stratagem.cluster as sc

CLUSTERS = ("h100-2048x8-leafspine", "h100-2048x8", "h100-12500x8")
GiB = 1 << 30


def timed(run):
    began = time.perf_counter()
    result = run()
    return time.perf_counter() - began, result


def measure(name: str, kinds: list[str], repeat: int) -> list[str]:
    loads, prices, estimates = [], {kind: [] for kind in kinds}, {}
    for _ in range(repeat):
        load_s, cluster = timed(lambda n=name: sc.load(n))
        loads.append(load_s)
        for kind in kinds:
            fresh = sc.load(name)
            price_s, estimates[kind] = timed(
                lambda c=fresh, k=kind: c.collective_estimate(k, GiB, [range(c.num_devices)]))
            prices[kind].append(price_s)
    rows = []
    for kind in kinds:
        estimate = estimates[kind]
        rows.append(f"{name:24s} {cluster.num_devices:>8,d} {len(cluster.links):>9,d} "
                    f"{statistics.median(loads):>7.3f} {kind:>14s} {statistics.median(prices[kind]):>8.3f} "
                    f"{estimate.time_s * 1e3:>9.2f}  {estimate.algorithm}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("clusters", nargs="*", default=list(CLUSTERS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kinds", default="all_reduce,all_to_all")
    args = parser.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    sc.load(args.clusters[0])                                   # imports and a first parse, not timed
    print(f"{'cluster':24s} {'devices':>8s} {'links':>9s} {'load s':>7s} {'collective':>14s} {'price s':>8s} "
          f"{'1 GiB ms':>9s}  algorithm")
    for name in args.clusters:
        for row in measure(name, kinds, args.repeat):
            print(row, flush=True)


if __name__ == "__main__":
    main()
