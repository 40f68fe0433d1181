"""`stratagem diff a.json b.json`: what changed between two plans: costs side by side, and every
op whose configuration differs."""

from __future__ import annotations

import argparse
from dataclasses import replace
from stratagem.planfile import load_plan
from stratagem.report.console import Console
from stratagem.report.diff import diff_plans
from stratagem.values import integer


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help="a plan file, or FRONTIER.json:INDEX")
    parser.add_argument("b", help="another plan file, or FRONTIER.json:INDEX")
    parser.add_argument("--top", type=int, default=None, help="list only the first N changed ops")


def run(args: argparse.Namespace) -> int:

    top = None if args.top is None else integer(args.top, "--top (changed ops to list)", minimum=0)
    out = Console()
    result = diff_plans(load_plan(args.a), load_plan(args.b))
    out.table(result.cost_table())
    if not result.same_graph:
        out.print(f"the plans are for different graphs: {len(result.only_in_a)} ops only in a "
                  f"({', '.join(result.only_in_a[:5])}...), {len(result.only_in_b)} only in b")
    ops = result.op_table()
    if top is not None:
        ops = replace(ops, rows=ops.rows[:top])
    if result.changed:
        out.table(ops)
    else:
        out.print(ops.title)
    return 0
