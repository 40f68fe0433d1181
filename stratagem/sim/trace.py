"""Chrome trace (the Trace Event Format Perfetto and chrome://tracing open) of a timeline.

One process per kind of resource (devices, links), one row (thread) per resource, named; every
task is a complete event ("ph": "X") on each resource it holds, in microseconds, with its kind
and op in `args`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stratagem.files import atomic_write_json


@dataclass(frozen=True)
class TraceTask:
    label: str
    category: str               # forward | backward | update | sync | reschedule
    resources: tuple[int, ...]
    start_s: float
    end_s: float
    args: tuple[tuple[str, Any], ...] = ()


def chrome_trace(tasks: Sequence[TraceTask], resource_names: Sequence[str],
                 resource_groups: Sequence[str]) -> dict:
    """`resource_groups[r]` names the process row group of resource r (e.g. "devices", "links")."""
    groups = list(dict.fromkeys(resource_groups))
    pid = {g: i + 1 for i, g in enumerate(groups)}
    events: list[dict] = []
    for g in groups:
        events.append({"name": "process_name", "ph": "M", "pid": pid[g], "tid": 0, "args": {"name": g}})
    for r, name in enumerate(resource_names):
        events.append({"name": "thread_name", "ph": "M", "pid": pid[resource_groups[r]], "tid": r,
                       "args": {"name": name}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": pid[resource_groups[r]], "tid": r,
                       "args": {"sort_index": r}})
    for task in tasks:
        for r in task.resources:
            events.append({"name": task.label, "cat": task.category, "ph": "X",
                           "ts": task.start_s * 1e6, "dur": max(task.end_s - task.start_s, 0.0) * 1e6,
                           "pid": pid[resource_groups[r]], "tid": r, "args": dict(task.args)})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(path: str | Path, trace: dict) -> None:
    atomic_write_json(path, trace)
