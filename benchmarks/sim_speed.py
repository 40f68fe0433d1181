"""Simulator speed (issue 4): full simulation's tasks per second, and delta simulation's speed-up
over full for single-op configuration changes, on FlexFlow's six models at 16 and 64 devices.

    python benchmarks/sim_speed.py [--cluster k80-16x4] [--devices 16 64] [--changes 20]

Per model and device count, from the data-parallel strategy:
  tasks        tasks in the task graph
  build_s      building the task graph (Python: regions, costs, buffers)
  engine_ms    Algorithm 1 over that graph (compiled), and engine_Mtask_s = tasks / engine time
  full_ms      what a search without delta pays per proposal: rebuild the task graph for the new
               strategy and simulate it (median over the changes); full_Mtask_s = tasks / full time,
               graph build included (issue 19's target: >= 1 M tasks/s on the Transformer at 64 H100s)
  delta_ms     `Simulation.change(op, config)`: edit the task graph, Algorithm 2, results (median)
               Each new configuration is priced once before both timings (the cost model caches
               op and edge costs, as FlexFlow caches profiled costs), so they compare simulation.
  replayed     median tasks Algorithm 2 re-simulated per change
  speedup      full_ms / delta_ms  (target >= 5x at 64 devices; FlexFlow Table 5: 2.2-6.9x)
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

MODELS = ("alexnet", "inception-v3", "resnet-101", "rnntc", "rnnlm", "nmt")


def measure(model_name: str, cluster: str, devices: int, changes: int, seed: int) -> dict:
    import stratagem as sg
    from stratagem.search.strategies import data_parallel_strategy
    from stratagem.search.context import context
    from stratagem.sim.builder import Simulation

    ctx = context(sg.zoo.build(model_name), cluster, devices)
    t0 = time.perf_counter()
    sim = Simulation(ctx.model, data_parallel_strategy(ctx))
    build_s = time.perf_counter() - t0
    sim.store.simulate()                                        # compile / warm
    t0 = time.perf_counter()
    tasks = sim.store.simulate()
    engine_s = time.perf_counter() - t0
    sim.run()
    rng = np.random.default_rng(seed)
    ops = [op.name for op in ctx.graph.ops]
    configs = {op: ctx.model.configurations(op) for op in ops}
    delta_s, full_s, replayed = [], [], []
    for _ in range(changes):
        op = ops[int(rng.integers(len(ops)))]
        config, old = configs[op][int(rng.integers(len(configs[op])))], sim.strategy[op]
        sim.change(op, config)                 # price the new configuration once (cost caches),
        sim.change(op, old)                    # so both timings below measure simulation alone
        t0 = time.perf_counter()
        sim.edit(op, config)
        replayed.append(sim.store.update())
        sim.result()
        delta_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        Simulation(ctx.model, dict(sim.strategy)).run()
        full_s.append(time.perf_counter() - t0)
    return {"model": model_name, "devices": devices, "tasks": tasks, "build_s": build_s,
            "engine_ms": engine_s * 1e3, "engine_Mtask_s": tasks / engine_s / 1e6,
            "full_ms": float(np.median(full_s)) * 1e3, "full_Mtask_s": tasks / float(np.median(full_s)) / 1e6,
            "delta_ms": float(np.median(delta_s)) * 1e3,
            "replayed": int(np.median(replayed)),
            "speedup": float(np.median(full_s) / np.median(delta_s))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", default="k80-16x4")
    parser.add_argument("--devices", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    columns = ("model", "devices", "tasks", "build_s", "engine_ms", "engine_Mtask_s", "full_ms",
               "full_Mtask_s", "delta_ms", "replayed", "speedup")
    print(f"cluster {args.cluster}, {args.changes} single-op changes per row, from data parallel")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for devices in args.devices:
        for name in args.models:
            row = measure(name, args.cluster, devices, args.changes, args.seed)
            cells = [f"{row[c]:.2f}" if isinstance(row[c], float) else str(row[c]) for c in columns]
            print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
