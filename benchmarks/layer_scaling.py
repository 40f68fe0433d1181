"""Planning time against depth (issue 19: repeated layers solved once): `stratagem plan`'s work on
LLaMA-style decoders of one width and several depths, each in a fresh process (cold: nothing of a
previous run is kept, and there is no on-disk cache), capture included, run as `stratagem plan`
runs a command: with the garbage collector's thresholds raised (`stratagem.collection`) and ended
without the interpreter's teardown (`stratagem.cli.exit_now`; ~1.4 s after torch.export at any
depth).

    python benchmarks/layer_scaling.py [--layers 12 48] [--dim 1024] [--cluster a100-1x8] [--repeats 3]

Per depth prints the ops, the chosen plan's simulated tasks, time and peak memory, the capture's
time and the wall time of the whole process (the median of `--repeats` fresh processes, the
depths taken in turn so that a slow spell of the machine falls on all of them, each run's wall
time beside it); then the deepest's median wall time over the shallowest's (target for 48 against
12 layers: < 1.5).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CHILD = r"""
import json, sys, time, warnings
start = time.perf_counter()
from stratagem.collection import fewer_collections
with fewer_collections():        # as `stratagem plan` runs a command (stratagem.cli.main)
    import torch
    from stratagem.frontend.capture import capture
    from stratagem.frontend.zoo.gpt import GPT, GPTConfig, llama_ffn_dim
    from stratagem.report.planning import PlanRequest, plan_model
    layers, dim, cluster = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    heads = dim // 64
    cfg = GPTConfig(32000, dim, layers, heads, heads, llama_ffn_dim(dim), 1024)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.device("meta"):
            model = GPT(cfg)
        tokens = torch.zeros(8, 1024, dtype=torch.long, device="meta")
        graph = capture(model, (tokens, tokens), name=f"decoder-{layers}x{dim}")
    captured = time.perf_counter()
    plan, fits = plan_model(graph, PlanRequest(f"decoder-{layers}", cluster))
print(json.dumps({"ops": len(graph.ops), "tasks": plan.details.get("num_tasks"),
                  "time_s": plan.iteration_time_s, "memory_gib": plan.peak_memory_bytes / 2**30,
                  "fits": fits, "capture_s": captured - start, "wall_s": time.perf_counter() - start}))
from stratagem.cli import exit_now
exit_now(0)                 # as `stratagem plan` ends: no teardown of the interpreter (~1.4 s here)
"""


def measure(layers: int, dim: int, cluster: str) -> dict:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, str(layers), str(dim), cluster], check=True,
                         capture_output=True, text=True)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    found["process_s"] = time.perf_counter() - start
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, nargs="+", default=[12, 48])
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--cluster", default="a100-1x8")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per depth (the median is shown)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    runs: dict[int, list[dict]] = {layers: [] for layers in args.layers}
    for _ in range(args.repeats):
        for layers in args.layers:
            runs[layers].append(measure(layers, args.dim, args.cluster))
    print(f"{'layers':>6} {'ops':>6} {'tasks':>7} {'plan time':>10} {'memory':>10} "
          f"{'capture':>8} {'process':>8}  runs")
    medians = []
    for layers in args.layers:
        found = sorted(runs[layers], key=lambda r: r["process_s"])
        r = found[len(found) // 2]
        medians.append(r["process_s"])
        each = " ".join(f"{x['process_s']:.1f}" for x in runs[layers])
        print(f"{layers:>6} {r['ops']:>6} {r['tasks'] or '-':>7} {r['time_s']:>9.3f}s "
              f"{r['memory_gib']:>7.2f}GiB {r['capture_s']:>7.1f}s {r['process_s']:>7.1f}s  {each}")
    print(f"deepest / shallowest wall time (medians): {medians[-1] / medians[0]:.2f}")


if __name__ == "__main__":
    main()
