"""A pipeline schedule run over its stages (GPipe, Huang et al. 2019 §2.2; 1F1B, Narayanan et al.
2021 §2.2): when each stage runs each micro-batch's forward and backward, and how many micro-batches'
activations it holds at once.

Each stage s runs its actions in the schedule's order (`stage_order`):
    gpipe   F0 .. F(m-1), then B0 .. B(m-1)
    1f1b    w = min(p - 1 - s, m) warm-up forwards, then (F(w+j), Bj) pairs, then the remaining Bs
and an action starts when the stage is free and its input is there:
    F(s, i)  after F(s-1, i) ends and its activations cross the cut (send_s[s-1])
    B(s, i)  after B(s+1, i) ends and its gradients cross back (send_back_s[s]); on the last stage
             after F(p-1, i)
The stage's tail (gradient synchronization and optimizer update, once per iteration) follows its
last backward; the iteration ends when the last tail does.

For p uniform stages (forward f, backward b, no transfer) both schedules take (m + p - 1)(f + b):
every stage idles (p - 1)(f + b), a bubble of (p - 1)/(m + p - 1) of the iteration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StageTimes:
    """One stage's work per micro-batch and per iteration, and its cut to the next stage."""
    forward_s: float
    backward_s: float
    tail_s: float               # after its last backward: gradient sync left over, optimizer update
    send_s: float = 0.0         # activations to the next stage
    send_back_s: float = 0.0    # gradients from the next stage back to this one


@dataclass(frozen=True)
class Action:
    stage: int
    kind: str                   # "F" or "B"
    micro_batch: int
    start_s: float
    end_s: float


@dataclass(frozen=True)
class ScheduleRun:
    actions: tuple[Action, ...]
    stage_end_s: tuple[float, ...]      # each stage's last tail end
    iteration_time_s: float
    in_flight: tuple[int, ...]          # per stage: most micro-batches forwarded, not yet backwarded

    def idle_fraction(self, stage: int) -> float:
        busy = sum(a.end_s - a.start_s for a in self.actions if a.stage == stage)
        return 1.0 - busy / self.iteration_time_s if self.iteration_time_s else 0.0


def stage_order(schedule: str, micro_batches: int, stages: int, stage: int) -> list[tuple[str, int]]:
    m = micro_batches
    if schedule == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warm = min(stages - 1 - stage, m)
    order = [("F", i) for i in range(warm)]
    for j in range(m - warm):
        order += [("F", warm + j), ("B", j)]
    return order + [("B", j) for j in range(m - warm, m)]


def run_schedule(times: Sequence[StageTimes], micro_batches: int, schedule: str) -> ScheduleRun:
    """Event order by dependency: each stage's next action waits for its input; the stages are
    visited until every action is placed (a schedule's order never deadlocks for these two)."""
    p = len(times)
    orders = [stage_order(schedule, micro_batches, p, s) for s in range(p)]
    done: dict[tuple[int, str, int], float] = {}
    position, free_at = [0] * p, [0.0] * p
    actions: list[Action] = []
    while any(position[s] < len(orders[s]) for s in range(p)):
        progressed = False
        for s in range(p):
            while position[s] < len(orders[s]):
                kind, i = orders[s][position[s]]
                ready = _ready(done, times, s, kind, i, p)
                if ready is None:
                    break
                start = max(ready, free_at[s])
                end = start + (times[s].forward_s if kind == "F" else times[s].backward_s)
                done[s, kind, i] = free_at[s] = end
                actions.append(Action(s, kind, i, start, end))
                position[s] += 1
                progressed = True
        if not progressed:
            raise RuntimeError(f"pipeline schedule {schedule!r} deadlocked at positions {position}")
    ends = tuple(free_at[s] + times[s].tail_s for s in range(p))
    return ScheduleRun(tuple(actions), ends, max(ends), tuple(_in_flight(actions, s) for s in range(p)))


def _ready(done, times, s: int, kind: str, i: int, p: int) -> float | None:
    if kind == "F":
        if s == 0:
            return 0.0
        end = done.get((s - 1, "F", i))
        return None if end is None else end + times[s - 1].send_s
    if s == p - 1:
        return done.get((s, "F", i))
    end = done.get((s + 1, "B", i))
    return None if end is None else end + times[s].send_back_s


def _in_flight(actions: Sequence[Action], stage: int) -> int:
    held = most = 0
    for a in sorted((a for a in actions if a.stage == stage), key=lambda a: a.start_s):
        held += 1 if a.kind == "F" else -1
        most = max(most, held)
    return most
