"""Peak memory per device over a simulated timeline.

Every buffer is a `Buffer(device, num_bytes, alloc_task, free_tasks)`: it is allocated when
`alloc_task` starts and freed when the last of `free_tasks` ends (alloc_task None: resident all
iteration, as weights, gradients and optimizer state are; no free_tasks: held to the end). On each device, events are ordered by time, frees
before allocations at the same instant, and the peak is the largest running sum:

    peak(d) = resident(d) + max_k sum_{i<=k} delta_i(d)     over d's events in that order
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


def peak_memory(buffers: Sequence[Buffer], start: np.ndarray, end: np.ndarray, num_devices: int
                ) -> np.ndarray:
    """Peak bytes per device; `start`/`end` are the simulated task times."""
    peaks = np.zeros(num_devices)
    if not buffers:
        return peaks
    device = np.array([b.device for b in buffers], dtype=np.int64)
    size = np.array([b.num_bytes for b in buffers], dtype=np.float64)
    resident = np.array([b.alloc_task is None for b in buffers])
    np.add.at(peaks, device[resident], size[resident])
    timed = ~resident
    if not timed.any():
        return peaks
    alloc = np.array([b.alloc_task for b in buffers if b.alloc_task is not None], dtype=np.int64)
    free = [b.free_tasks for b in buffers if b.alloc_task is not None]
    t_alloc = start[alloc]
    t_free = np.array([max(end[f] for f in fs) if fs else np.inf for fs in free])
    dev = device[timed]
    sz = size[timed]
    times = np.concatenate([t_alloc, t_free])
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
