"""Cost-model fidelity on this CPU: predicted against measured iteration time and peak memory of
several plans for one model on gloo ranks, and whether the model ranks the plans as the machine does.

    PYTHONPATH=$PWD python benchmarks/fidelity_cpu.py --model mlp --devices 2 [--comm t.json --ops t.json]

1. Calibrate: `stratagem profile comm` (collective times on these ranks) and `stratagem profile ops
   --nproc N` (every distinct local op of the model, measured by N processes side by side as the
   ranks run them) unless tables are given, and a cluster file naming both (cpu-1xN's figures).
2. Plan on that cluster file (the cost model prefers measured entries): every point of FT's
   frontier, and the baselines (data-parallel, owt, mesh-tf, tofu-like), each plan once; plans the
   runtime refuses are listed and left out.
3. Run all plans in one torchrun launch (`--steps`, the first `--warmup` untimed) and print, per plan,
   measured and predicted time and memory with the relative errors, then the Spearman rank
   correlation and Kendall's tau-b of predicted and measured times (measured pairs closer than their
   run-to-run spread, half the interquartile range of the timed steps, count as ties).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from stratagem.cli.validate import spearman, table
from stratagem.cluster import with_tables
from stratagem.frontend import zoo
from stratagem.runtime.runnable import check_runnable
from stratagem.runtime.session import RunOptions, run_plans
from stratagem.search import registry
from stratagem.search.context import context
from stratagem.search.ft_search import frontier

BASELINES = ("data-parallel", "owt", "mesh-tf", "tofu-like")


def calibrate(model: str, devices: int, directory: Path, comm: str | None, ops: str | None) -> str:
    """A cluster file naming both tables: `profile comm` on `devices` ranks, `profile ops` measured
    by `devices` processes side by side (as the ranks run); given tables are used as they are."""
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    cluster = directory / "calibrated.yaml"
    if comm is None:
        comm = str(directory / "comm.json")
        subprocess.run([sys.executable, "-m", "stratagem", "profile", "comm", "--nproc", str(devices), "-o", comm],
                       check=True, env=env)
    if ops is None:
        ops = str(directory / "ops.json")
        subprocess.run([sys.executable, "-m", "stratagem", "profile", "ops", model, "--devices", str(devices),
                        "--nproc", str(devices), "--max-axes", "2", "-o", ops], check=True, env=env)
    with_tables(f"cpu-1x{devices}", cluster, ops=ops, comm=comm)
    return str(cluster)


def candidate_plans(model: str, devices: int, cluster: str) -> list:
    ctx = context(zoo.build(model), cluster, devices)
    plans = list(frontier(ctx))
    for i, p in enumerate(plans):
        object.__setattr__(p, "algorithm", f"ft[{i}]")
    plans += [registry.run(ctx, name) for name in BASELINES]
    unique, seen = [], set()
    for p in plans:
        key = tuple(sorted((op, str(c)) for op, c in p.strategy.items()))
        if key in seen:
            continue
        seen.add(key)
        refused = check_runnable(p)
        if refused:
            print(f"left out {p.algorithm}: {refused[0]}")
            continue
        unique.append(p)
    return unique


def spread_s(times: list[float]) -> float:
    """Run-to-run spread of a plan's step time: half the interquartile range of its timed steps."""
    ordered = sorted(times)
    if len(ordered) < 4:
        return (ordered[-1] - ordered[0]) / 2
    return (ordered[(3 * len(ordered)) // 4] - ordered[len(ordered) // 4]) / 2


def kendall_tau(predicted: list[float], measured: list[float], spreads: list[float]) -> float:
    """Kendall's tau-b of predicted against measured times; a pair whose measured times differ by
    less than the larger of their spreads is a tie in the measurement."""
    concordant = discordant = tied_predicted = tied_measured = 0
    for i in range(len(predicted)):
        for j in range(i + 1, len(predicted)):
            dp = predicted[i] - predicted[j]
            dm = measured[i] - measured[j]
            tie_m = abs(dm) <= max(spreads[i], spreads[j])
            if dp == 0 and tie_m:
                continue
            if dp == 0:
                tied_predicted += 1
            elif tie_m:
                tied_measured += 1
            elif (dp > 0) == (dm > 0):
                concordant += 1
            else:
                discordant += 1
    n0 = concordant + discordant
    denominator = ((n0 + tied_predicted) * (n0 + tied_measured)) ** 0.5
    return (concordant - discordant) / denominator if denominator else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--comm", help="a `stratagem profile comm` table (default: profile now)")
    parser.add_argument("--ops", help="a `stratagem profile ops` table (default: profile now)")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("-o", "--output", help="write the reports (JSON) here")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="fidelity-"))
    cluster = calibrate(args.model, args.devices, directory, args.comm, args.ops)
    plans = candidate_plans(args.model, args.devices, cluster)
    paths = []
    for i, p in enumerate(plans):
        paths.append(directory / f"{p.algorithm.replace('[', '').replace(']', '')}.json")
        p.save(paths[-1])
    reports = run_plans(paths, RunOptions(steps=args.steps, warmup=args.warmup, timeout_s=600))
    print(f"\n{args.model} on {args.devices} gloo ranks, {args.steps} steps ({args.warmup} untimed), "
          f"cluster {cluster}")
    print(table(reports))
    times = ([r["predicted_iteration_time_s"] for r in reports], [r["iteration_time_s"] for r in reports])
    mem_errors = [abs(r["memory_rel_error"]) for r in reports]
    time_errors = [abs(r["time_rel_error"]) for r in reports]
    spreads = [spread_s(r["step_times_s"][args.warmup:]) for r in reports]
    print(f"Spearman rank correlation (time): {spearman(*times):+.3f} over {len(reports)} plans; Kendall tau-b "
          f"{kendall_tau(*times, spreads):+.3f} (measured pairs closer than their spread count as ties)")
    print(f"mean |time error| {sum(time_errors) / len(time_errors):.1%}, "
          f"mean |memory error| {sum(mem_errors) / len(mem_errors):.1%}")
    if args.output:
        Path(args.output).write_text(json.dumps({"plans": reports, "cluster": cluster}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
