"""Peak memory per device over a simulated timeline.

Every buffer is a `Buffer(device, num_bytes, alloc_task, free_tasks)`: it is allocated when
`alloc_task` starts and freed when the last of `free_tasks` ends (alloc_task None: resident all
iteration, as weights, gradients and optimizer state are; no free_tasks: held to the end). On each
device, events are ordered by time, frees before allocations at the same instant, and the peak is
the largest running sum:

    peak(d) = resident(d) + max_k sum_{i<=k} delta_i(d)     over d's events in that order

Buffers are kept as `BufferSet`s (arrays, one set per op or edge, built once), so a re-simulation
after one op changes concatenates arrays instead of walking every buffer in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Buffer:
    device: int
    num_bytes: float
    alloc_task: int | None             # None: resident
    free_tasks: tuple[int, ...] = ()   # freed when the last of these ends; (): held to the end


@dataclass(frozen=True)
class BufferSet:
    device: np.ndarray          # int64 [n]
    num_bytes: np.ndarray       # float64 [n]
    alloc_task: np.ndarray      # int64 [n], -1 for resident
    free_count: np.ndarray      # int64 [n]
    free_tasks: np.ndarray      # int64 [sum(free_count)]

    @staticmethod
    def of(buffers: Sequence[Buffer]) -> "BufferSet":
        return BufferSet(np.array([b.device for b in buffers], dtype=np.int64),
                         np.array([b.num_bytes for b in buffers], dtype=np.float64),
                         np.array([-1 if b.alloc_task is None else b.alloc_task for b in buffers], dtype=np.int64),
                         np.array([len(b.free_tasks) for b in buffers], dtype=np.int64),
                         np.array([t for b in buffers for t in b.free_tasks], dtype=np.int64))


def peak_memory(buffers: Sequence[Buffer] | Sequence[BufferSet], start: np.ndarray, end: np.ndarray,
                num_devices: int) -> np.ndarray:
    """Peak bytes per device; `start`/`end` are the simulated task times."""
    sets = [b for b in buffers if isinstance(b, BufferSet)]
    loose = [b for b in buffers if isinstance(b, Buffer)]
    if loose:
        sets.append(BufferSet.of(loose))
    peaks = np.zeros(num_devices)
    if not sets:
        return peaks
    device = np.concatenate([s.device for s in sets])
    size = np.concatenate([s.num_bytes for s in sets])
    alloc = np.concatenate([s.alloc_task for s in sets])
    count = np.concatenate([s.free_count for s in sets])
    free = np.concatenate([s.free_tasks for s in sets])
    resident = alloc < 0
    np.add.at(peaks, device[resident], size[resident])
    timed = ~resident
    if not timed.any():
        return peaks
    t_free = np.full(len(size), np.inf)
    has_free = count > 0
    if has_free.any():
        offsets = np.concatenate([[0], np.cumsum(count)[:-1]])[has_free]
        t_free[has_free] = np.maximum.reduceat(end[free], offsets)
    dev, sz = device[timed], size[timed]
    times = np.concatenate([start[alloc[timed]], t_free[timed]])
    deltas = np.concatenate([sz, -sz])
    devs = np.concatenate([dev, dev])
    frees_first = np.concatenate([np.ones(len(sz)), np.zeros(len(sz))])   # 0 sorts first
    order = np.lexsort((frees_first, times, devs))
    devs, deltas = devs[order], deltas[order]
    running = np.cumsum(deltas)
    starts = np.searchsorted(devs, np.arange(num_devices), side="left")
    stops = np.searchsorted(devs, np.arange(num_devices), side="right")
    for d in range(num_devices):
        if stops[d] > starts[d]:
            base = running[starts[d] - 1] if starts[d] > 0 else 0.0
            peaks[d] += max(0.0, float(np.max(running[starts[d]:stops[d]] - base)))
    return peaks
