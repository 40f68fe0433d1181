"""`stratagem reproduce NAME`: regenerate a figure or table of the three papers on the simulated
paper clusters, as Markdown, CSV and PNG under docs/results/ (or --out).

    stratagem reproduce --list
    stratagem reproduce tensoropt-fig6
    stratagem reproduce all --quick --out /tmp/results      # tiny models: minutes, not hours
"""

from __future__ import annotations

import argparse
from pathlib import Path
from stratagem.errors import ConfigError
from stratagem.report import reproduce
from stratagem.report.console import Console
from stratagem.report.reproduce.common import Settings
from stratagem.report.tables import Table


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="a reproduction (see --list), or all")
    parser.add_argument("--list", action="store_true", help="list the reproductions")
    parser.add_argument("--quick", action="store_true", help="tiny models and few devices (a smoke run)")
    parser.add_argument("--out", default="docs/results", help="directory to write to (default: docs/results)")


def run(args: argparse.Namespace) -> int:

    out = Console()
    table = reproduce.reproductions()
    if args.list or not args.name:
        rows = [(r.name, r.paper, ", ".join(r.missing()) or "-") for r in table.values()]
        out.table(Table(("name", "reproduces", "waits for"), tuple(rows), "", (False, False, False)))
        if not args.list:
            raise ConfigError("no reproduction named", expected="a name from the list above, or all")
        return 0
    names = list(table) if args.name == "all" else [reproduce.lookup(args.name).name]
    settings = Settings(Path(args.out), args.quick, out.track)
    for name in names:
        with out.status(f"reproducing {name}" + (" (quick)" if args.quick else "")):
            result = reproduce.run(name, settings)
        state = f"pending (needs {', '.join(result.pending)})" if result.pending else f"{result.elapsed_s:.0f} s"
        out.print(f"{name}: {state}: " + ", ".join(str(f) for f in result.files))
    return 0
