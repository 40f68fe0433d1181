"""`stratagem models [PATTERN ...] [--no-capture] [--tiny]`: the model zoo, one line per model.

Columns: parameters (counted on the captured graph, or on the module built on meta with
--no-capture), the published count where one exists, the default batch size, the op count of the
captured graph (each model is captured once per run), and the source. Torch is imported only here.
"""

from __future__ import annotations

import argparse
import fnmatch
import warnings
from collections.abc import Iterable
from typing import Any


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("patterns", nargs="*", metavar="PATTERN",
                        help="model names or shell patterns (e.g. 'gpt-*'); default: all")
    parser.add_argument("--no-capture", action="store_true",
                        help="do not capture: count parameters on the module, leave ops out (fast)")
    parser.add_argument("--tiny", action="store_true", help="list the tiny variants as well")


def run(args: argparse.Namespace) -> int:
    from stratagem.frontend import zoo
    chosen = select(zoo, args.patterns, args.tiny)
    rows = [row(zoo, name, capture=not args.no_capture) for name in chosen]
    print(format_table(["model", "params", "published", "batch", "ops", "source"], rows))
    return 0


def select(zoo: Any, patterns: Iterable[str], tiny: bool) -> list[str]:
    every = [n for name in zoo.names() for n in ((name, name + "-tiny") if tiny else (name,))]
    patterns = list(patterns)
    if not patterns:
        return every
    chosen: list[str] = []
    for pattern in patterns:
        matched = fnmatch.filter(every, pattern) if any(c in pattern for c in "*?[") else [pattern]
        for name in matched:
            zoo.resolve(name)          # an unknown name raises, listing close names
            if name not in chosen:
                chosen.append(name)
    return chosen


def row(zoo: Any, name: str, capture: bool) -> list[str]:
    info = zoo.info(name)
    published = human(info.published.parameters) if info.published else "-"
    try:
        params, ops = _measure(zoo, name, capture)
    except Exception as error:   # noqa: BLE001 - one model that fails does not hide the others
        return [name, "-", published, str(info.batch_size), f"error: {error}"[:60], info.source]
    return [name, human(params), published, str(info.batch_size), ops, info.source]


def _measure(zoo: Any, name: str, capture: bool) -> tuple[int, str]:
    if not capture:
        model, _ = zoo.module(name)
        return sum(p.numel() for p in model.parameters()), "-"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = zoo.build(name)
    return graph.num_parameters, str(len(graph.ops))


def human(count: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if count >= size:
            return f"{count / size:.2f}{unit}"
    return str(count)


def format_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    lines = []
    for r in [header, *rows]:
        cells = [r[i].ljust(widths[i]) if i == 0 else r[i].rjust(widths[i]) for i in range(len(widths))]
        lines.append("  ".join([*cells, r[-1]]))
    return "\n".join(lines)
