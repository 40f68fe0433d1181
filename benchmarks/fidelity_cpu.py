"""Cost-model fidelity on this CPU: predicted against measured iteration time and peak memory of
every plan FT's frontier and the baselines give, for several models on gloo ranks, and whether the
cost model ranks the plans as the machine does.

    PYTHONPATH=$PWD python benchmarks/fidelity_cpu.py       # the whole sweep: tens of minutes per rank count
    PYTHONPATH=$PWD python benchmarks/fidelity_cpu.py --models mlp gpt-tiny resnet-tiny transformer-mini \\
        --devices 2 4 --held-out transformer-mini --plot docs/results -o fidelity.json
    PYTHONPATH=$PWD python benchmarks/fidelity_cpu.py --model mlp --devices 2 [--comm t.json --ops t.json]
    PYTHONPATH=$PWD python benchmarks/fidelity_cpu.py --from-json fidelity.json --plot docs/results

Per rank count N (`--devices`, default 2 and 4):
1. Calibrate: one `stratagem profile comm --nproc N` (collective times on N ranks) for every model,
   and per model `stratagem profile ops MODEL --nproc N` (its distinct local ops, measured by N
   processes side by side as the ranks run them), each profiled once and reused. The held-out model
   (`--held-out`, default transformer-mini; `none` for none) is never profiled: its table is the
   others' tables merged (ComputeTable.merged), so its predictions come from measurements of other
   models only. Tables given with `--ops`/`--comm` are used as they are, for every model; those
   already in `--tables DIR` (from an earlier run) are reused.
2. Plan on a cluster file naming those tables (cpu-1xN's figures): every point of FT's frontier
   (named ft[i]) and the baselines (data-parallel, owt, mesh-tf, tofu-like), each distinct plan once;
   plans the runtime refuses are listed and left out.
3. Run a model's plans in one torchrun launch (`--steps`, the first `--warmup` untimed).

It prints, per (model, ranks), each plan's measured time with its run-to-run spread (half the
interquartile range of the timed steps, leaving out the step whose memory was tracked), predicted
time, measured and predicted peak memory, the relative errors, then the Spearman rank correlation
and Kendall's tau-b of predicted and measured times (measured pairs closer than their spread count
as ties), and whether FT's leanest predicted point measures leanest (within 1 %: one memory
measurement per plan, so no spread) and its fastest measures fastest (within the spread); then the
overall figures. Every report goes to a JSON (`-o`, default in a temporary directory; its path is
printed), written again after each (model, ranks), so a stopped sweep keeps what it measured.
`--plot DIR` writes DIR/fidelity-cpu.png (predicted against measured time and memory, log scales,
the y = x line and a +-10 % band; hollow markers: the held-out model) and DIR/fidelity-cpu.md (the
summary tables, the command and the date). `--from-json FILE` redoes the summary and the plot from a
saved JSON without running anything (seconds); with `--repredict`, every plan is simulated again by
this checkout on its run's cluster and tables, the measurements kept (a cost-model change scored on
runs already made, in minutes).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from stratagem.cli.validate import spearman

BASELINES = ("data-parallel", "owt", "mesh-tf", "tofu-like")
MODELS = ("mlp", "gpt-tiny", "resnet-tiny", "transformer-mini")
MEMORY_SPREAD = 0.01        # relative; the runtime tracks memory on one step, so no run-to-run spread
BAND = 0.10                 # the plot's band around y = x
REPO = Path(__file__).resolve().parents[1]


# ---- calibration ---------------------------------------------------------------------------------

def stratagem(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, "-m", "stratagem", *args], check=True, env=env)


def comm_table(devices: int, directory: Path) -> str:
    """`profile comm` on `devices` ranks, once per rank count (the file is reused)."""
    path = directory / f"comm-{devices}.json"
    if not path.exists():
        stratagem("profile", "comm", "--nproc", str(devices), "-o", str(path))
    return str(path)


def ops_table(model: str, devices: int, directory: Path) -> str:
    """`profile ops` of one model by `devices` processes side by side, once (the file is reused)."""
    path = directory / f"ops-{model}-{devices}.json"
    if not path.exists():
        stratagem("profile", "ops", model, "--devices", str(devices), "--nproc", str(devices),
                  "--max-axes", "2", "-o", str(path))
    return str(path)


def held_out_table(others: list[str], devices: int, directory: Path) -> str:
    """The other models' tables merged: what the held-out model is predicted from."""
    from stratagem.cost import ComputeTable
    tables = [ComputeTable.load(ops_table(m, devices, directory)) for m in others]
    path = directory / f"ops-without-{devices}.json"
    functools.reduce(ComputeTable.merged, tables).save(path)
    return str(path)


def tables_for(model: str, models: list[str], held_out: str | None, devices: int, directory: Path,
               given: argparse.Namespace) -> tuple[str, str]:
    """(ops, comm) table paths for one model on `devices` ranks."""
    comm = given.comm or comm_table(devices, directory)
    if given.ops:
        return given.ops, comm
    if model == held_out:
        return held_out_table([m for m in models if m != held_out], devices, directory), comm
    return ops_table(model, devices, directory), comm


# ---- plans and runs ------------------------------------------------------------------------------

def candidate_plans(model: str, devices: int, cluster: str) -> tuple[list, list[str]]:
    """FT's frontier (ft[i]) and the baselines, each distinct plan once; and the refused ones."""
    from stratagem.frontend import zoo
    from stratagem.runtime.runnable import check_runnable
    from stratagem.search import registry
    from stratagem.search.context import context
    from stratagem.search.ft_search import frontier
    ctx = context(zoo.build(model), cluster, devices)
    plans = list(frontier(ctx))
    for i, p in enumerate(plans):
        object.__setattr__(p, "algorithm", f"ft[{i}]")
    plans += [registry.run(ctx, name) for name in BASELINES]
    unique, seen, left_out = [], set(), []
    for p in plans:
        key = tuple(sorted((op, str(c)) for op, c in p.strategy.items()))
        if key in seen:
            continue
        seen.add(key)
        refused = check_runnable(p)
        if refused:
            left_out.append(f"{p.algorithm}: {refused[0]}")
            print(f"left out {left_out[-1]}")
            continue
        unique.append(p)
    return unique, left_out


def measure(model: str, devices: int, ops: str, comm: str, directory: Path, args: argparse.Namespace) -> dict:
    """Plan one model on `devices` ranks with these tables, run every plan, and return the record."""
    from stratagem.cluster import with_tables
    from stratagem.runtime.session import RunOptions, run_plans
    cluster = directory / f"cluster-{model}-{devices}.yaml"
    with_tables(f"cpu-1x{devices}", cluster, ops=ops, comm=comm)
    plans, left_out = candidate_plans(model, devices, str(cluster))
    paths = []
    for p in plans:
        paths.append(directory / f"{model}-{devices}-{p.algorithm.replace('[', '').replace(']', '')}.json")
        p.save(paths[-1])
    reports = run_plans(paths, RunOptions(steps=args.steps, warmup=args.warmup, timeout_s=args.timeout_s))
    for r in reports:
        r["time_spread_s"] = spread_s(timed(r["step_times_s"], args.warmup))
        r["memory_spread_bytes"] = None
    return {"model": model, "devices": devices, "held_out": model == args.held_out, "cluster": str(cluster),
            "ops_table": ops, "comm_table": comm, "steps": args.steps, "warmup": args.warmup,
            "left_out": left_out, "plans": reports}


# ---- scores --------------------------------------------------------------------------------------

def timed(times: list[float], warmup: int) -> list[float]:
    """The steps the runtime times: after the warm-up, without the step whose memory it tracked
    (the second, or the only one; MemTracker slows it)."""
    from stratagem.runtime.session import timed_steps
    return timed_steps(times, warmup, 1 if len(times) > 1 else 0)


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


def memory_spread(report: dict) -> float:
    return report.get("memory_spread_bytes") or MEMORY_SPREAD * report["peak_memory_bytes_max"]


def best_measures_best(points: list[dict], predicted: str, measured: str, spread) -> bool | None:
    """Whether the point predicted least (in `predicted`) measures least, or within the larger of
    its spread and the least one's; None with fewer than two points."""
    if len(points) < 2:
        return None
    chosen = min(points, key=lambda r: r[predicted])
    least = min(points, key=lambda r: r[measured])
    return chosen[measured] - least[measured] <= max(spread(chosen), spread(least))


def ft_checks(reports: list[dict]) -> dict:
    """Whether FT's leanest predicted point measures leanest and its fastest measures fastest."""
    ft = [r for r in reports if (r["algorithm"] or "").startswith("ft[")]
    return {"ft_points": len(ft),
            "ft_leanest_measures_leanest": best_measures_best(
                ft, "predicted_peak_memory_bytes", "peak_memory_bytes_max", memory_spread),
            "ft_fastest_measures_fastest": best_measures_best(
                ft, "predicted_iteration_time_s", "iteration_time_s", lambda r: r["time_spread_s"])}


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def score(record: dict) -> dict:
    """One (model, ranks): errors, rank correlations and FT's two checks."""
    reports = record["plans"]
    times = ([r["predicted_iteration_time_s"] for r in reports], [r["iteration_time_s"] for r in reports])
    time_errors = [abs(r["time_rel_error"]) for r in reports]
    memory_errors = [abs(r["memory_rel_error"]) for r in reports]
    return {"model": record["model"], "devices": record["devices"], "held_out": record["held_out"],
            "plans": len(reports), "time_error_mean": mean(time_errors),
            "time_error_max": max(time_errors, default=float("nan")), "memory_error_mean": mean(memory_errors),
            "memory_error_max": max(memory_errors, default=float("nan")),
            "spearman": spearman(*times) if len(reports) > 1 else float("nan"),
            "kendall_tau_b": kendall_tau(*times, [r["time_spread_s"] for r in reports]), **ft_checks(reports)}


def overall(records: list[dict]) -> dict:
    """Over every (model, ranks): the errors' mean and max over every plan, the correlations' mean
    and least."""
    reports = [r for record in records for r in record["plans"]]
    out = {}
    for key in ("time", "memory"):
        errors = [abs(r[f"{key}_rel_error"]) for r in reports]
        out[f"{key}_error_mean"], out[f"{key}_error_max"] = mean(errors), max(errors, default=float("nan"))
    scores = [score(record) for record in records]
    for key in ("spearman", "kendall_tau_b"):
        values = [s[key] for s in scores if not math.isnan(s[key])]
        out[f"{key}_mean"], out[f"{key}_min"] = mean(values), min(values, default=float("nan"))
    return out


# ---- text ----------------------------------------------------------------------------------------

def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def mib(num_bytes: float) -> str:
    return f"{num_bytes / 2 ** 20:.1f} MiB"


def pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{value * 100:+.1f}%"


def yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def plan_rows(reports: list[dict]) -> list[list[str]]:
    return [[r["algorithm"] or "-", f"{ms(r['iteration_time_s'])} ± {r['time_spread_s'] * 1e3:.1f}",
             ms(r["predicted_iteration_time_s"]), pct(r["time_rel_error"]), mib(r["peak_memory_bytes_max"]),
             mib(r["predicted_peak_memory_bytes"]), pct(r["memory_rel_error"])] for r in reports]


PLAN_HEADER = ["plan", "measured", "predicted", "error", "peak memory", "predicted", "error"]
SCORE_HEADER = ["model", "ranks", "plans", "time error mean", "max", "memory error mean", "max", "Spearman",
                "Kendall tau-b", "FT leanest measures leanest", "FT fastest measures fastest", "ops table"]


def score_row(s: dict) -> list[str]:
    pcts = [f"{s[k] * 100:.1f}%" for k in ("time_error_mean", "time_error_max", "memory_error_mean",
                                           "memory_error_max")]
    return [s["model"], str(s["devices"]), str(s["plans"]), *pcts, f"{s['spearman']:+.2f}",
            f"{s['kendall_tau_b']:+.2f}", yes_no(s["ft_leanest_measures_leanest"]),
            yes_no(s["ft_fastest_measures_fastest"]), "held out: other models'" if s["held_out"] else "its own"]


def text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                     for row in [header, *rows])


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def overall_line(total: dict) -> str:
    return (f"time error mean {total['time_error_mean']:.1%} (max {total['time_error_max']:.1%}), memory error "
            f"mean {total['memory_error_mean']:.1%} (max {total['memory_error_max']:.1%}); Spearman mean "
            f"{total['spearman_mean']:+.2f} (least {total['spearman_min']:+.2f}), Kendall tau-b mean "
            f"{total['kendall_tau_b_mean']:+.2f} (least {total['kendall_tau_b_min']:+.2f})")


def print_record(record: dict) -> None:
    s = score(record)
    held = " (held out: tables of the other models only)" if record["held_out"] else ""
    print(f"\n{record['model']} on {record['devices']} gloo ranks{held}, {record['steps']} steps "
          f"({record['warmup']} untimed), cluster {record['cluster']}")
    print(text_table(PLAN_HEADER, plan_rows(record["plans"])))
    print(f"Spearman rank correlation (time): {s['spearman']:+.3f} over {s['plans']} plans; Kendall tau-b "
          f"{s['kendall_tau_b']:+.3f} (measured pairs closer than their spread count as ties)")
    print(f"mean |time error| {s['time_error_mean']:.1%}, mean |memory error| {s['memory_error_mean']:.1%}; "
          f"FT's leanest measures leanest: {yes_no(s['ft_leanest_measures_leanest'])}, its fastest "
          f"measures fastest: {yes_no(s['ft_fastest_measures_fastest'])}")


def markdown(data: dict) -> str:
    """fidelity-cpu.md: the summary table, overall figures, each (model, ranks)'s plans."""
    scores = [score(r) for r in data["runs"]]
    held = data.get("held_out")
    held_text = (f"Held out: `{held}`, planned with op tables merged from the other models' (never measured "
                 f"on it)." if held else "No model held out: each planned with its own op table.")
    parts = ["# Cost-model fidelity on the CPU", "", f"`{data['command']}` ({data['date']}). {held_text}",
             ("Time: median step (slowest rank) after the warm-up, ± half the interquartile range; memory: the "
              "largest rank's peak of live tensor bytes; errors are (measured - predicted) / measured. Kendall "
              "tau-b counts measured pairs closer than their spread as ties; FT's leanest counts as leanest "
              "within 1 % (memory is measured once), its fastest as fastest within the time spread."), "",
             markdown_table(SCORE_HEADER, [score_row(s) for s in scores]), "",
             "Overall: " + overall_line(overall(data["runs"])) + ".", "",
             "![predicted against measured](fidelity-cpu.png)"]
    for record in data["runs"]:
        parts += ["", f"## {record['model']}, {record['devices']} ranks", "",
                  markdown_table(PLAN_HEADER, plan_rows(record["plans"]))]
        parts += [f"\nLeft out: {'; '.join(record['left_out'])}"] if record["left_out"] else []
    return "\n".join(parts) + "\n"


# ---- plot ----------------------------------------------------------------------------------------

MARKERS = "osD^vP*X"


def scatter(axis, data: dict, measured: str, predicted: str, scale: float, unit: str, spread: str = "") -> None:
    """One panel: predicted against measured, a marker per model (hollow: held out), a colour per
    rank count; `spread` (a report key) draws each measurement's spread."""
    models = list(dict.fromkeys(r["model"] for r in data["runs"]))
    colours = {n: f"C{i}" for i, n in enumerate(sorted({r["devices"] for r in data["runs"]}))}
    values = []
    for record in data["runs"]:
        xs = [r[measured] / scale for r in record["plans"]]
        ys = [r[predicted] / scale for r in record["plans"]]
        values += xs + ys
        colour = colours[record["devices"]]
        if spread:
            axis.errorbar(xs, ys, xerr=[r[spread] / scale for r in record["plans"]], fmt="none", ecolor=colour,
                          alpha=0.4, linewidth=0.8, zorder=2)
        axis.scatter(xs, ys, marker=MARKERS[models.index(record["model"]) % len(MARKERS)], edgecolors=colour,
                     facecolors="none" if record["held_out"] else colour, alpha=0.8, zorder=3,
                     label=f"{record['model']}{' (held out)' if record['held_out'] else ''}, "
                           f"{record['devices']} ranks")
    line = [min(values) / 1.2, max(values) * 1.2]
    axis.plot(line, line, "k-", linewidth=0.8, zorder=1, label="predicted = measured")
    axis.fill_between(line, [v * (1 - BAND) for v in line], [v * (1 + BAND) for v in line], color="0.88",
                      zorder=0, label=f"±{BAND:.0%}")
    axis.set(xscale="log", yscale="log", xlabel=f"measured ({unit})", ylabel=f"predicted ({unit})")
    plain = tick_format()
    for ax in (axis.xaxis, axis.yaxis):
        ax.set_major_formatter(plain)
        ax.set_minor_formatter(plain)


def tick_format():
    from matplotlib.ticker import FuncFormatter
    return FuncFormatter(lambda value, _: f"{value:g}" if f"{value:.0e}"[0] in "125" else "")


def plot(data: dict, directory: Path) -> Path:
    from stratagem.report.plots import pyplot, save
    figure, (time_axis, memory_axis) = pyplot().subplots(1, 2, figsize=(12, 5.5))
    scatter(time_axis, data, "iteration_time_s", "predicted_iteration_time_s", 1e-3, "ms", "time_spread_s")
    time_axis.set_title("iteration time (bars: run-to-run spread)")
    scatter(memory_axis, data, "peak_memory_bytes_max", "predicted_peak_memory_bytes", 2 ** 20, "MiB")
    memory_axis.set_title("peak memory per rank")
    memory_axis.legend(fontsize=7, loc="upper left")
    return save(figure, directory / "fidelity-cpu.png")


# ---- main ----------------------------------------------------------------------------------------

def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--model", help="one model (as --models MODEL)")
    parser.add_argument("--devices", nargs="+", type=int, default=[2, 4], help="rank counts")
    parser.add_argument("--held-out", default="transformer-mini",
                        help="planned from the other models' op tables only ('none': no model)")
    parser.add_argument("--comm", help="a `stratagem profile comm` table for every model (default: profile now)")
    parser.add_argument("--ops", help="a `stratagem profile ops` table for every model (default: profile now)")
    parser.add_argument("--tables", metavar="DIR", help="where the profiled tables, cluster and plan files go; "
                        "tables already there are reused (default: a new temporary directory)")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--timeout-s", type=float, default=1800, help="per launch (one model's plans)")
    parser.add_argument("-o", "--output", help="the reports (JSON); default: in a temporary directory")
    parser.add_argument("--plot", metavar="DIR", help="write DIR/fidelity-cpu.png and DIR/fidelity-cpu.md")
    parser.add_argument("--from-json", metavar="FILE", help="summarise a saved JSON; run nothing")
    parser.add_argument("--repredict", action="store_true",
                        help="with --from-json: predict every plan again with this checkout's cost model and "
                             "simulator, on its run's cluster and tables, keeping what was measured")
    args = parser.parse_args()
    args.models = [args.model] if args.model else args.models
    if args.repredict and not args.from_json:
        parser.error("--repredict re-scores a saved sweep: give it --from-json FILE")
    if args.held_out == "none" or args.ops or args.held_out not in args.models or len(args.models) < 2:
        args.held_out = None
    return args


def sweep(args: argparse.Namespace, output: Path) -> dict:
    """Every (model, ranks), the JSON rewritten after each."""
    directory = Path(args.tables or tempfile.mkdtemp(prefix="fidelity-"))
    directory.mkdir(parents=True, exist_ok=True)
    data = {"command": "python benchmarks/fidelity_cpu.py " + " ".join(sys.argv[1:]),
            "date": datetime.date.today().isoformat(), "held_out": args.held_out, "tables": str(directory),
            "runs": []}
    for devices in args.devices:
        for model in args.models:
            ops, comm = tables_for(model, args.models, args.held_out, devices, directory, args)
            data["runs"].append(measure(model, devices, ops, comm, directory, args))
            output.write_text(json.dumps(data, indent=1))
            print_record(data["runs"][-1])
    return data


def loaded(path: str) -> dict:
    """A saved JSON; the single-model format ({"plans", "cluster"}) is read as one run."""
    data = json.loads(Path(path).read_text())
    if "runs" in data:
        return data
    plans = data["plans"]
    warmup = 2
    for r in plans:
        r.setdefault("time_spread_s", spread_s(timed(r["step_times_s"], warmup)))
    run = {"model": plans[0]["model"], "devices": plans[0]["world_size"], "held_out": False,
           "cluster": data.get("cluster", "-"), "steps": plans[0]["steps"], "warmup": warmup, "left_out": [],
           "plans": plans}
    return {"command": f"(from {path})", "date": "-", "held_out": None, "runs": [run]}


def repredicted(data: dict) -> dict:
    """Every plan simulated again by this checkout on its run's cluster file (its tables), the
    measured figures kept: a cost-model change scored on runs already made. The plan files must be
    where the sweep wrote them."""
    import stratagem as sg
    from stratagem.plan import Plan
    from stratagem.runtime.session import relative_error
    for record in data["runs"]:
        for r in record["plans"]:
            plan = Plan.load(r["plan"])
            if plan.recompute or plan.offload_activations or plan.strategy.pipeline is not None:
                raise SystemExit(f"{r['plan']}: --repredict simulates plain plans (no recomputation, offload "
                                 "or stages); run the sweep again for this one")
            result = sg.simulate(plan.graph, record["cluster"], plan.strategy, plan.num_devices, plan.optimizer,
                                 with_trace=False, precision=plan.precision)
            r["predicted_iteration_time_s"] = result.iteration_time_s
            r["predicted_peak_memory_bytes"] = result.peak_memory_bytes
            r["time_rel_error"] = relative_error(r["iteration_time_s"], result.iteration_time_s)
            r["memory_rel_error"] = relative_error(r["peak_memory_bytes_max"], result.peak_memory_bytes)
    data["command"] += " (predictions again: python benchmarks/fidelity_cpu.py --from-json FILE --repredict)"
    return data


def main() -> int:
    args = arguments()
    if args.from_json:
        data = loaded(args.from_json)
        if args.repredict:
            data = repredicted(data)
        for record in data["runs"]:
            print_record(record)
    else:
        output = Path(args.output or Path(tempfile.mkdtemp(prefix="fidelity-report-")) / "fidelity.json")
        print(f"reports: {output}")
        data = sweep(args, output)
        print(f"\nreports written to {output}")
    if data["runs"]:
        print("\noverall: " + overall_line(overall(data["runs"])))
    if args.plot and data["runs"]:
        directory = Path(args.plot)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "fidelity-cpu.md").write_text(markdown(data))
        print(f"wrote {plot(data, directory)} and {directory / 'fidelity-cpu.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
