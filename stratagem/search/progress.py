"""What a search is doing and how far it is, told to whoever watches: the `stratagem` commands
draw it as bars on a terminal (report.console); a search run from Python tells no one by default.

    Progress                 the reporter a search calls: phase(name, total) opens a phase inside
                             the open one (if any), advance(n) counts n more of its units done
                             (total None: a count with no end), done() closes the innermost phase
    SILENT                   the reporter that does nothing (the default of every planning context)
    phase(progress, name, total)   a `with` block that opens a phase and closes it however the
                             block ends, so phases nest as the searches that open them do

Phases and their units: cost tables (ops, then edges), FT's eliminations (nodes, per peak pass),
frontier points simulated, MCMC proposals (per chain), pipeline (stage, micro-batch) counts,
Tofu's steps, random strategies, branch and bound's strategies simulated, device counts (modes).
A search calls advance once per unit, never more often than its loop turns.

This module imports nothing: the planner core calls it, and the report layer implements it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol


class Progress(Protocol):
    def phase(self, name: str, total: int | None = None) -> None: ...

    def advance(self, n: int = 1) -> None: ...

    def done(self) -> None: ...


@dataclass(frozen=True)
class Silent:
    """The reporter that tells no one."""

    def phase(self, name: str, total: int | None = None) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def done(self) -> None:
        pass


SILENT = Silent()


@contextlib.contextmanager
def phase(progress: Progress, name: str, total: int | None = None) -> Iterator[Progress]:
    """`progress` with the phase `name` open for the block; closed when the block ends, by an
    exception (Ctrl-C's KeyboardInterrupt included) as well."""
    progress.phase(name, total)
    try:
        yield progress
    finally:
        progress.done()


__all__ = ["SILENT", "Progress", "Silent", "phase"]
