"""Smoke run of the MCMC, Tofu and exhaustive searches on every zoo model (or those named).

    PYTHONPATH=. python benchmarks/search_zoo.py [--cluster p100-4x4] [--devices 4] [names...]

Prints, per model: ops, each search's simulated iteration time and wall time, or the error it
raised (exhaustive refuses most models: that is the expected outcome, with its estimate).
"""

from __future__ import annotations

import argparse
import time
import warnings

from stratagem import zoo
from stratagem.errors import StratagemError
from stratagem.search.planner import search

RUNS = {"mcmc": dict(budget_s=None, max_proposals=30, seed=0),
        "tofu": {},
        "exhaustive": dict(max_time_s=20.0, probes=5)}


def run(name: str, cluster: str, devices: int) -> str:
    began = time.perf_counter()
    try:
        graph = zoo.build(name)
    except Exception as error:                       # a zoo model that does not build here
        return f"{name:16s} build failed: {type(error).__name__}: {str(error)[:100]}"
    cells = [f"{name:16s} {len(graph.ops):5d} ops  capture {time.perf_counter() - began:5.1f} s"]
    for algorithm, kwargs in RUNS.items():
        began = time.perf_counter()
        try:
            plan = search(graph, cluster, algorithm=algorithm, devices=devices, **kwargs)
            cells.append(f"{algorithm} {plan.iteration_time_s * 1e3:9.2f} ms ({time.perf_counter() - began:5.1f} s)")
        except StratagemError as error:
            cells.append(f"{algorithm} {type(error).__name__} ({time.perf_counter() - began:5.1f} s): {error.got}")
    return "  ".join(cells)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("names", nargs="*")
    parser.add_argument("--cluster", default="p100-4x4")
    parser.add_argument("--devices", type=int, default=4)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    for name in args.names or zoo.names():
        print(run(name, args.cluster, args.devices), flush=True)


if __name__ == "__main__":
    main()
