"""The papers' figures and tables, regenerated on the simulated paper clusters.

    reproductions()                 name -> Reproduction, in the order of docs/results/README.md
    run(name, Settings(out_dir, quick))   writes <name>.md, <name>.csv and <name>.png under out_dir

Each reproduction is a function of its Settings that returns an Outcome (tables, a figure, notes).
`quick` runs the same code on tiny models and few devices (for tests); the full runs regenerate
docs/results/. A reproduction whose search algorithm is not registered in
`search.registry.ALGORITHMS` is written as pending, with the reason, and no numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stratagem.errors import ConfigError
from stratagem.report.reproduce import flexflow, tensoropt, tofu
from stratagem.report.reproduce.common import Outcome, Settings, write_outcome, write_pending
from stratagem.search.registry import ALGORITHMS
import difflib


@dataclass(frozen=True)
class Reproduction:
    name: str
    paper: str
    about: str
    make: Callable[[Settings], Outcome]
    needs: tuple[str, ...] = ()          # search algorithms it runs besides FT and the baselines

    def missing(self) -> tuple[str, ...]:
        return tuple(a for a in self.needs if a not in ALGORITHMS)


def reproductions() -> dict[str, Reproduction]:
    items = [*tensoropt.REPRODUCTIONS, *flexflow.REPRODUCTIONS, *tofu.REPRODUCTIONS]
    return {r[0]: Reproduction(*r) for r in items}


def lookup(name: str) -> Reproduction:
    table = reproductions()
    if name not in table:
        close = difflib.get_close_matches(name, table, n=3, cutoff=0.4)
        raise ConfigError(f"no reproduction {name!r}", expected=f"one of {', '.join(table)} or all", got=repr(name),
                          hint=("Did you mean " + " or ".join(close) + "? " if close else "")
                          + "`stratagem reproduce --list` lists them")
    return table[name]


@dataclass(frozen=True)
class Result:
    name: str
    files: tuple[Path, ...]
    pending: tuple[str, ...]           # algorithms it waits for (then no numbers were made)
    elapsed_s: float


def run(name: str, settings: Settings) -> Result:
    reproduction = lookup(name)
    start = time.perf_counter()
    missing = reproduction.missing()
    if missing:
        files = write_pending(settings, reproduction.name, reproduction.paper, reproduction.about, missing)
        return Result(name, files, missing, time.perf_counter() - start)
    outcome = reproduction.make(settings)
    elapsed_s = time.perf_counter() - start
    files = write_outcome(settings, reproduction.name, reproduction.paper, outcome, elapsed_s)
    return Result(name, files, (), elapsed_s)
