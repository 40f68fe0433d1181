"""Work beside FT: what the modes need after FT's frontier but not from it (the pipeline search's
plans, the practitioners' plans), done meanwhile in one forked worker where there is a second CPU.

    with beside(ctx, tasks, in_worker, yielding) as side:   # tasks: {name: fn(ctx) -> list of plans}
        front = frontier(ctx, ...)                   # here; meanwhile the worker runs the tasks
                                                     # named in in_worker, in that order
        side.result("staged")                        # the worker's result; its progress events
                                                     # replayed to ctx.progress as they come

FT's passes are one process on one core, and these tasks are independent of them: on two cores
they cost no wall time up to FT's own. FT's larger combines run on threads, though, and the
alternatives are priced in a worker of their own meanwhile (search.ft_search): the tasks named in
`yielding` (those read last, after FT's frontier and its stages) run at the least priority
(nice 19), so that they take only a CPU nothing else wants (nice orders runnable processes only:
while this process waits for their result they run at full speed).

A result is computed here (as a serial run computes it) where there is no worker
(stratagem.forked.background: one CPU, STRATAGEM_WORKERS=1, inside a worker), where the task was
not given to the worker, or where the worker failed (a
RuntimeWarning says why, once). While this process waits for a result the worker has not sent,
it computes itself a task queued after it that the worker has not begun (the worker's copy of it,
if it gets there, is dropped). Plans of ctx's graph travel back without it and get it here
(context.plans_shared's way); plans of other graphs (a pipeline's micro-batch graph) keep theirs.
The worker is killed, if it still runs, and reaped on leaving the block; a Ctrl-C while a result
is awaited propagates.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from stratagem.forked import Background, background
from stratagem.plan import Plan
from stratagem.search.context import PlanningContext

Task = Callable[[PlanningContext], list]
LEAST_PRIORITY = 19            # nice: the tasks read last yield the CPU to the rest of the planning


@contextlib.contextmanager
def beside(ctx: PlanningContext, tasks: Mapping[str, Task], in_worker: Sequence[str],
           yielding: Sequence[str] = ()) -> Iterator[Beside]:
    """A Beside whose worker runs the tasks named in `in_worker` (none: no worker is forked), those
    also named in `yielding` at the least priority."""
    names = [name for name in in_worker if name in tasks]
    if not names:
        yield Beside(ctx, tasks, None, ())
        return
    with background(partial(_run_in_worker, ctx, tasks, names, frozenset(yielding))) as job:
        yield Beside(ctx, tasks, job, tuple(names) if job is not None else ())


@dataclass
class Beside:
    """The tasks' results as this process sees them (`result`)."""
    ctx: PlanningContext
    tasks: Mapping[str, Task]
    job: Background | None
    in_worker: tuple[str, ...]
    arrived: dict[str, list] = field(default_factory=dict)
    pending: deque = field(default_factory=deque)      # messages taken, not yet read
    started: list[str] = field(default_factory=list)   # the tasks the worker has begun, in order
    stolen: set[str] = field(default_factory=set)      # tasks in_worker computed here instead
    warned: bool = False

    def result(self, name: str) -> list:
        """Task `name`'s result: the worker's where it ran it, else computed here."""
        if name not in self.arrived and name in self.in_worker:
            self._receive(name)
        if name not in self.arrived:
            self.arrived[name] = self.tasks[name](self.ctx)
        return self.arrived[name]

    def _receive(self, name: str) -> None:
        """Take the worker's messages in order until `name`'s result (keeping the results before
        it, and what came after it for later), replaying the progress of the tasks it runs for
        this process; while none has come, compute here a task queued after `name` that the worker
        has not started (`_stealable`: this process would otherwise wait idle, and the worker
        would reach it later); where the worker ended first, warn (once)."""
        opened = 0
        try:
            while name not in self.arrived:
                if not self.pending:
                    self.pending.extend(self.job.take(wait=False))
                if not self.pending and self._compute_stealable(name):
                    continue
                if not self.pending:
                    self.pending.extend(self.job.take(wait=True))
                    if not self.pending:
                        break                          # the worker ended
                opened += self._read(self.pending.popleft())
        finally:
            for _ in range(opened):
                self.ctx.progress.done()
        if name not in self.arrived and not self.warned:
            self.warned = True
            warnings.warn(f"the worker beside FT failed ({self.job.failure or 'it ended early'}); "
                          f"what it had not sent is computed here", RuntimeWarning, stacklevel=3)

    def _read(self, message: tuple) -> int:
        """One message of the worker taken in: the phases it leaves open (+1, -1 or 0)."""
        kind, *args = message
        if kind == "start":
            self.started.append(args[0])
        elif kind == "result":
            self.arrived.setdefault(args[0], _arrived(args[1], self.ctx))
        elif self.started and self.started[-1] not in self.stolen:
            getattr(self.ctx.progress, kind)(*args)
            return {"phase": 1, "done": -1}.get(kind, 0)
        return 0

    def _compute_stealable(self, name: str) -> bool:
        """Compute here the last task queued after `name` that the worker has not started, if any."""
        later = self.in_worker[self.in_worker.index(name) + 1:]
        waiting = [t for t in later if t not in self.started and t not in self.arrived]
        if not waiting:
            return False
        self.stolen.add(waiting[-1])
        self.arrived[waiting[-1]] = self.tasks[waiting[-1]](self.ctx)
        return True


def _run_in_worker(ctx: PlanningContext, tasks: Mapping[str, Task], names: Sequence[str],
                   yielding: frozenset[str], send: Callable[[Any], None]) -> None:
    """The worker: for each named task ("start", name), its progress events as they come, then
    ("result", name, value); from the first task in `yielding` on, at the least priority (a
    process cannot raise its priority back)."""
    forwarded = replace(ctx, progress=_Forwarded(send))
    for name in names:
        if name in yielding:
            _least_priority()
        send(("start", name))
        send(("result", name, _travelling(tasks[name](forwarded), ctx)))


def _least_priority() -> None:
    """This process at nice 19 (the least CPU priority; where the system refuses, as it is)."""
    try:
        os.nice(LEAST_PRIORITY - os.nice(0))
    except OSError:
        pass


def _travelling(result: list, ctx: PlanningContext) -> list:
    return [replace(p, graph=None) if isinstance(p, Plan) and p.graph is ctx.graph else p for p in result]


def _arrived(result: list, ctx: PlanningContext) -> list:
    return [replace(p, graph=ctx.graph) if isinstance(p, Plan) and p.graph is None else p for p in result]


@dataclass(frozen=True)
class _Forwarded:
    """A worker's progress reporter: each call sent to the process that shows it."""
    send: Callable[[Any], None]

    def phase(self, name: str, total: int | None = None) -> None:
        self.send(("phase", name, total))

    def advance(self, n: int = 1) -> None:
        self.send(("advance", n))

    def done(self) -> None:
        self.send(("done",))


__all__ = ["Beside", "Task", "beside"]
