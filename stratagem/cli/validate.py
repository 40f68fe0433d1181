"""`stratagem validate plan.json [plan.json ...] [--per-op [STEPS]]`: measured against predicted
time and memory.

Runs every plan (one launch, all plans for the same device count) and prints, per plan, the measured
iteration time and peak memory beside the plan's predictions with the relative error
(measured - predicted) / measured; with two plans or more, the Spearman rank correlation of
predicted and measured times (does the cost model order the plans as the machine does?). With
`--per-op`, STEPS more steps time each op's input moves, kernel, backward and gradient sync on every
rank (after the timed steps, which the timing would perturb), and the ops whose measured time
differs most from the prediction are listed (report.per_op).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from stratagem.cli.run import add_run_arguments, mib, ms, run_options
from stratagem.files import atomic_write_json
from stratagem.planfile import load_plan
from stratagem.report.per_op import per_op_rows, per_op_table


# (argument, what it is, suffixes its writer can produce): checked before any work (cli.main)
OUTPUTS = (("output", "validation report", ()),)

def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("plans", nargs="+", metavar="plan.json", help="plan files for one device count")
    add_run_arguments(parser, steps=12)
    parser.add_argument("--per-op", type=int, nargs="?", const=3, default=0, metavar="STEPS",
                        help="then time each op and its moves on every rank for STEPS more steps (default 3) "
                             "and list the ops whose measured time differs most from the prediction")
    parser.add_argument("--shown", type=int, default=15, help="ops listed with --per-op")
    parser.add_argument("-o", "--output", help="write the reports (JSON) here")


def run(args: argparse.Namespace) -> int:
    from stratagem.runtime.session import run_plans
    reports = run_plans(args.plans, replace(run_options(args, check=False), op_time_steps=args.per_op))
    print(table(reports))
    for path, report in zip(args.plans, reports):
        if "op_times" in report:
            print(per_op(path, report, args.shown))
    if len(reports) > 1:
        rho = spearman([r["predicted_iteration_time_s"] for r in reports], [r["iteration_time_s"] for r in reports])
        print(f"Spearman rank correlation of predicted and measured time over {len(reports)} plans: {rho:+.3f}")
    if args.output:
        atomic_write_json(args.output, {"plans": reports})
    return 0


def per_op(path: str, report: dict, shown: int) -> str:
    rows, step_s, predicted_s = per_op_rows(load_plan(path), report["op_times"])
    return f"\n{path}: per op, mean of {report['op_times']['ranks'][0]['steps']} steps (compute: slowest rank; moves, " \
        "sync: fastest rank)\n" + \
        per_op_table(rows, step_s, predicted_s, shown)


def table(reports: list[dict]) -> str:
    header = ["plan", "algorithm", "measured", "predicted", "error", "peak mem", "predicted", "error"]
    rows = [[r["plan"].rsplit("/", 1)[-1], r["algorithm"] or "-", ms(r["iteration_time_s"]),
             ms(r["predicted_iteration_time_s"]), pct(r["time_rel_error"]), mib(r["peak_memory_bytes_max"]),
             mib(r["predicted_peak_memory_bytes"]), pct(r["memory_rel_error"])] for r in reports]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                     for row in [header, *rows])


def pct(value: float) -> str:
    return "-" if value != value else f"{value * 100:+.1f}%"


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman's rho: the Pearson correlation of the ranks (ties share their mean rank)."""
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    norm = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return cov / norm if norm else float("nan")


def ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out
