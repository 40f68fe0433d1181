"""`stratagem simulate plan.json`: simulate one iteration of a plan (FlexFlow §5) and compare with
what the plan file recorded; optionally write the timeline as a Chrome trace (open it in Perfetto
or chrome://tracing).

    stratagem simulate plan.json --trace trace.json
    stratagem simulate pipeline.json --schedule schedule.png   # a plan with stages: its schedule
    stratagem simulate plan.json --cluster my-cluster.yaml      # the same strategy elsewhere
"""

from __future__ import annotations

import argparse
from stratagem.planfile import load_plan
from stratagem.report.console import Console
from stratagem.report.simulate_report import simulate_plan
from stratagem.report.stages import write_schedule_png


# (argument, what it is, suffixes its writer can produce): checked before any work (cli.main)
OUTPUTS = (("trace", "trace file", ()), ("schedule", "schedule picture", (".png", ".pdf", ".svg")))

def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("plan", help="a plan file written by `stratagem plan -o`, or FRONTIER.json:INDEX")
    parser.add_argument("--trace", default=None, metavar="JSON", help="write the timeline as a Chrome trace")
    parser.add_argument("--cluster", default=None, help="simulate on this cluster instead of the plan's")
    parser.add_argument("--schedule", default=None, metavar="PNG",
                        help="draw a plan's pipeline schedule (stages by time; plans with stages only)")


def run(args: argparse.Namespace) -> int:
    out = Console()
    plan = load_plan(args.plan)
    with out.status(f"simulating {args.plan}"):
        report = simulate_plan(plan, args.cluster, with_trace=args.trace is not None)
    for line in report.lines():
        out.print(line)
    out.table(report.device_table())
    if args.trace:
        report.write_trace(args.trace)
        out.print(f"Chrome trace written to {args.trace} ({report.result.num_tasks} tasks; open in "
                  f"https://ui.perfetto.dev or chrome://tracing)")
    if args.schedule:
        if report.schedule_run is None:
            out.print(f"no schedule drawn: {args.plan} has no pipeline stages")
            return 2
        write_schedule_png(plan, report.schedule_run, args.schedule)
        out.print(f"schedule written to {args.schedule}")
    return 0
