"""A search.progress reporter for the tests: it keeps what it is told and, given `stop_after`, its
advance() call of that number raises KeyboardInterrupt, where a Ctrl-C would land (`on_stop` may
do something else instead, e.g. send the process SIGINT; `again`: every call after it does too)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass(frozen=True)
class Phase:
    name: str
    total: int | None
    units: int            # the sum of advance(n) while it was the innermost phase
    calls: int            # advance() calls while it was


def _interrupt() -> None:
    raise KeyboardInterrupt


@dataclass
class Recorder:
    stop_after: int | None = None
    on_stop: Callable[[], None] = _interrupt
    again: bool = False
    events: list[tuple] = field(default_factory=list)
    calls: int = 0

    def phase(self, name: str, total: int | None = None) -> None:
        self.events.append(("phase", name, total))

    def advance(self, n: int = 1) -> None:
        self.events.append(("advance", n))
        self.calls += 1
        if self.stop_after is not None and (self.calls == self.stop_after
                                            or (self.again and self.calls > self.stop_after)):
            self.on_stop()

    def done(self) -> None:
        self.events.append(("done",))

    def phases(self) -> list[Phase]:
        """Every phase opened, in order; fails unless each was closed, innermost first."""
        opened, stack = [], []
        for event in self.events:
            if event[0] == "phase":
                stack.append(len(opened))
                opened.append([event[1], event[2], 0, 0])
            elif event[0] == "advance":
                assert stack, "advance() outside any phase"
                opened[stack[-1]][2] += event[1]
                opened[stack[-1]][3] += 1
            else:
                assert stack, "done() with no phase open"
                stack.pop()
        assert not stack, f"phases left open: {[opened[i][0] for i in stack]}"
        return [Phase(*p) for p in opened]

    def calls_before(self, name: str) -> int:
        """advance() calls made before the first phase whose name starts with `name` opened."""
        calls = 0
        for event in self.events:
            if event[0] == "phase" and event[1].startswith(name):
                return calls
            calls += event[0] == "advance"
        raise AssertionError(f"no phase {name!r} in {[p.name for p in self.phases()]}")


def stopped_run(search: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`search(*args, **kwargs)`, which a Recorder stops: a KeyboardInterrupt that gets out (the
    search returned nothing) fails the test, instead of ending the whole pytest run."""
    try:
        return search(*args, **kwargs)
    except KeyboardInterrupt:
        pytest.fail(f"{getattr(search, '__name__', search)} let Ctrl-C through instead of returning its best so far")
