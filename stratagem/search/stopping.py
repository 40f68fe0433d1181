"""A search stopped by Ctrl-C returns the best it has found so far, and its plan says so.

The first Ctrl-C raises KeyboardInterrupt wherever the search is. Each search catches it in the
loop of the phase that knows its best so far, and returns that: FT the frontier points simulated
(or, before it has a frontier, the baseline it priced first), MCMC its best strategy, the pipeline
search its candidates priced, the modes the device counts planned. Every plan it returns carries
an `Interruption` under details["interrupted"] (a frontier: its details, plans and alternatives
all do), so whichever plan a caller picks says it. A search with nothing found yet falls back to
data parallel, priced then (`fallback_plan`).

A caller handed a marked result runs no further phase (`stopped`); one with no best of its own
raises KeyboardInterrupt again (`raise_if_stopped`) for the search above it to catch. A second
Ctrl-C belongs to the command line (cli.stopping): it aborts at once.

    Interruption(phase, kept)              the record: what was running, what was kept
    interruption(details)                  the record in a plan's or frontier's details, or None
    marked(plan, record), marked_frontier(front, record)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from stratagem.plan import Frontier, Plan
from stratagem.search.context import PlanningContext, make_plan
from stratagem.search.strategies import data_parallel_strategy

KEY = "interrupted"
BASELINE_KEPT = "data parallel (the search had found no plan yet)"


@dataclass(frozen=True)
class Interruption:
    phase: str          # what the search was doing: "FT pass 2 (eliminations)"
    kept: str           # what the plan is: "the 3 frontier points simulated so far"

    def to_dict(self) -> dict[str, str]:
        return {"phase": self.phase, "kept": self.kept}

    @property
    def text(self) -> str:
        return f"stopped by Ctrl-C during {self.phase}; kept {self.kept}"


def interruption(details: Mapping[str, Any]) -> Interruption | None:
    found = details.get(KEY)
    if not isinstance(found, Mapping):
        return None
    return Interruption(str(found.get("phase", "the search")), str(found.get("kept", "the best found so far")))


def stopped(found: Plan | Frontier) -> bool:
    """Whether a plan or frontier comes from a search stopped by Ctrl-C."""
    return interruption(found.details) is not None


def raise_if_stopped(found: Plan | Frontier) -> None:
    """Stop the caller too: KeyboardInterrupt again, for the search above it to catch."""
    if stopped(found):
        raise KeyboardInterrupt


def marked(plan: Plan, record: Interruption) -> Plan:
    """`plan` saying it was kept when the search stopped (a plan marked already keeps its record:
    the first Ctrl-C is the one that stopped the search)."""
    if stopped(plan):
        return plan
    return replace(plan, details={**plan.details, KEY: record.to_dict()})


def marked_frontier(front: Frontier, record: Interruption) -> Frontier:
    record = interruption(front.details) or record
    return Frontier([marked(p, record) for p in front], {**front.details, KEY: record.to_dict()},
                    [marked(p, record) for p in front.alternatives])


def fallback_plan(ctx: PlanningContext, phase: str) -> Plan:
    """Data parallel, priced now: the plan of a search stopped before it found one."""
    record = Interruption(phase, BASELINE_KEPT)
    return marked(make_plan(ctx, data_parallel_strategy(ctx), "data-parallel"), record)


__all__ = ["BASELINE_KEPT", "Interruption", "fallback_plan", "interruption", "marked", "marked_frontier", "raise_if_stopped",
           "stopped"]
