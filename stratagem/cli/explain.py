"""`stratagem explain plan.json`: a plan's stages, if it has them (per stage its devices, ops, times
per micro-batch and micro-batches in flight); per op, its configuration, output placements, time (forward,
backward, update, gradient sync, re-scheduling of its inputs), memory and communication; per
repeated block, what the plan recomputes, shards and offloads there and what recomputing or
offloading its activations saves and costs (report.blocks); then the strategy as a picture, ops by devices (FlexFlow Fig. 12-13), as
text and optionally as a PNG.

    stratagem explain plan.json --sort time --top 20 --picture strategy.png
"""

from __future__ import annotations

import argparse

from stratagem.report.explain import SORT_KEYS
from stratagem.planfile import load_plan
from stratagem.report import blocks, explain, picture
from stratagem.report.console import Console
from stratagem.report.plan_summary import plan_lines
from stratagem.report.replay import model_of
from stratagem.report.stages import stage_table
from stratagem.report.units import format_bytes, format_seconds


# (argument, what it is, suffixes its writer can produce): checked before any work (cli.main)
OUTPUTS = (("picture", "picture", (".png", ".pdf", ".svg")),)

def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("plan", help="a plan file written by `stratagem plan -o`, or FRONTIER.json:INDEX")
    parser.add_argument("--sort", choices=SORT_KEYS, default="graph", help="order of the op table (default: graph)")
    parser.add_argument("--top", type=int, default=None, help="show only the first N ops of that order")
    parser.add_argument("--picture", default=None, metavar="PNG", help="draw ops by devices as a PNG")
    parser.add_argument("--no-text-picture", action="store_true", help="leave out the text picture")
    parser.add_argument("--no-blocks", action="store_true", help="leave out the table of repeated blocks")


def run(args: argparse.Namespace) -> int:
    out = Console()
    plan = load_plan(args.plan)
    for line in plan_lines(plan):
        out.print(line)
    if plan.strategy.pipeline is not None:
        out.table(stage_table(plan))
    with out.status("pricing every op"):
        model = model_of(plan)
        rows = explain.explain(plan, model)
    shown = explain.sorted_rows(rows, args.sort, args.top)
    out.table(explain.explain_table(shown, f"{len(shown)} of {len(rows)} ops, per device of each op"))
    sums = explain.totals(rows)
    out.print(f"sums over ops (additive): compute {format_seconds(sums['compute_time_s'])}, gradient sync "
              f"{format_seconds(sums['sync_time_s'])}, re-scheduling {format_seconds(sums['reschedule_time_s'])}, "
              f"{format_bytes(sums['communication_bytes'])} moved")
    if not args.no_blocks:
        with out.status("pricing each block kept, recomputed and offloaded"):
            block_rows = blocks.block_rows(plan, model)
        if block_rows:
            out.table(blocks.block_table(block_rows, f"{len(block_rows)} repeated blocks, summed over their ops "
                                                     "per device of each op (additive)"))
    cells = picture.strategy_cells(plan, model.analyses)
    if not args.no_text_picture:
        out.print("")
        out.print(picture.picture_text(plan, cells))
    if args.picture:
        picture.write_picture_png(plan, cells, args.picture)
        out.print(f"picture written to {args.picture}")
    return 0
