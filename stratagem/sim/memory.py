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
from numba import njit


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


class BufferColumns:
    """One op's or edge's buffers: each column (a kind of buffer) has one buffer per device of
    `devices`; `done()` lists them device by device, each device's in column order (as adding
    every device's buffers in turn would), without a Python object per buffer.

    The free tasks are kept as one block of columns per buffer column ([devices, w], -1 for no
    task): laid side by side, the block matrix read row by row, -1s left out, is `free_tasks` in
    that order, and each row's count per block is `free_count`."""

    def __init__(self, devices: range):
        self.devices = devices
        self._bytes: list[float] = []
        self._alloc: list = []                      # per column: a task for all devices, or one each
        self._frees: list[np.ndarray | None] = []   # per column: [devices, w] free tasks, None: held to the end
        self._dense = True                          # every block one task per device, none -1

    def add(self, num_bytes: float, alloc, until=None) -> None:
        """A buffer of `num_bytes` on every device: allocated when `alloc` starts (None: resident;
        a task for all devices, or one per device), freed when until[i] ends on the i-th device
        (None: held to the end)."""
        n = len(self.devices)
        self._bytes.append(num_bytes)
        self._alloc.append(-1 if alloc is None else alloc if isinstance(alloc, (int, np.integer))
                           else task_ids(alloc).reshape(n))
        self._frees.append(None if until is None else _per_device(until, n).reshape(n, 1))

    def add_users(self, num_bytes: float, alloc, users: np.ndarray) -> None:
        """As `add`, freed when the last task of row i of `users` ends on the i-th device (-1 in a
        row: no task)."""
        self._bytes.append(num_bytes)
        self._alloc.append(alloc if isinstance(alloc, (int, np.integer)) else task_ids(alloc).reshape(len(self.devices)))
        self._frees.append(users)
        self._dense = False

    def done(self) -> BufferSet:
        n, m = len(self.devices), len(self._bytes)
        if not m:
            return BufferSet(*(np.empty(0, dtype=t) for t in (np.int64, np.float64, np.int64, np.int64, np.int64)))
        device = np.arange(self.devices.start, self.devices.stop, dtype=np.int64)
        counts, free_tasks = self._freed(n, m)
        if m == 1:                                      # one column: its arrays are the set's
            alloc = np.full(n, self._alloc[0], dtype=np.int64) if isinstance(self._alloc[0], (int, np.integer)) \
                else self._alloc[0]
            return BufferSet(device, np.full(n, self._bytes[0], dtype=np.float64), alloc, counts.ravel(), free_tasks)
        alloc = np.empty((n, m), dtype=np.int64)
        for c, tasks in enumerate(self._alloc):
            alloc[:, c] = tasks
        num_bytes = np.empty((n, m), dtype=np.float64)
        num_bytes[:] = self._bytes
        return BufferSet(device.repeat(m), num_bytes.ravel(), alloc.ravel(), counts.ravel(), free_tasks)

    def _freed(self, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
        """(free tasks per device and column [n, m], the free tasks row by row): the columns'
        blocks side by side, -1s left out."""
        counts = np.zeros((n, m), dtype=np.int64)
        blocks = [c for c, block in enumerate(self._frees) if block is not None and block.shape[1]]
        if not blocks:
            return counts, np.empty(0, dtype=np.int64)
        tasks = self._frees[blocks[0]] if len(blocks) == 1 else np.concatenate([self._frees[c] for c in blocks], axis=1)
        if self._dense:                                 # one task each: the blocks' matrix as it is
            counts[:, blocks] = 1
            return counts, tasks.ravel()
        some = tasks >= 0
        if len(blocks) == 1:
            counts[:, blocks[0]] = some.sum(axis=1)
        else:
            widths = np.fromiter((self._frees[c].shape[1] for c in blocks), dtype=np.int64, count=len(blocks))
            counts[:, blocks] = np.add.reduceat(some, np.cumsum(widths) - widths, axis=1)
        return counts, tasks[some]


def task_ids(tasks) -> np.ndarray:
    """Task ids (or any ints) as an int64 array; a range without making its items one by one."""
    if isinstance(tasks, range):
        return np.arange(tasks.start, tasks.stop, tasks.step, dtype=np.int64)
    return np.asarray(tasks, dtype=np.int64)


def _per_device(tasks, n: int) -> np.ndarray:
    """One task per device: a task for all, or one each (a range or a sequence)."""
    if isinstance(tasks, (int, np.integer)):
        return np.full(n, tasks, dtype=np.int64)
    return task_ids(tasks).reshape(n)


def peak_memory(buffers: Sequence[Buffer] | Sequence[BufferSet], start: np.ndarray, end: np.ndarray,
                num_devices: int) -> np.ndarray:
    """Peak bytes per device; `start`/`end` are the simulated task times."""
    return _peaks(_merged(buffers), start, end, num_devices)[0]


def peak_memory_and_instants(buffers: Sequence[Buffer] | Sequence[BufferSet], start: np.ndarray,
                             end: np.ndarray, num_devices: int) -> tuple[np.ndarray, np.ndarray]:
    """Peak bytes per device, and when each device first reaches it (-inf: resident only)."""
    return _peaks(_merged(buffers), start, end, num_devices)


def live_bytes(buffers: BufferSet, start: np.ndarray, end: np.ndarray, device: int, time_s: float) -> float:
    """Bytes of `buffers` held on `device` at `time_s` (allocated at or before, freed after)."""
    return float(live_bytes_by_set([buffers], start, end, device, time_s)[0])


def live_bytes_by_set(sets: Sequence[BufferSet], start: np.ndarray, end: np.ndarray, device: int,
                      time_s: float) -> np.ndarray:
    """`live_bytes` of each of `sets`, in one pass over all their buffers."""
    sizes = np.fromiter((len(s.num_bytes) for s in sets), dtype=np.int64, count=len(sets))
    if not sizes.sum():
        return np.zeros(len(sets))
    merged = _concatenated(sets)
    t_alloc, t_free = _lives(merged, start, end)
    live = (merged.device == device) & ((merged.alloc_task < 0) | ((t_alloc <= time_s) & (time_s < t_free)))
    owner = np.repeat(np.arange(len(sets)), sizes)
    return np.bincount(owner[live], weights=merged.num_bytes[live], minlength=len(sets))


def merged_with_owners(owners: Sequence[int], sets: Sequence[BufferSet]) -> tuple[BufferSet, np.ndarray]:
    """The sets as one (rows in the sets' order), and each row's owner (owners ascending: what
    `spliced` keeps up to date)."""
    sizes = np.fromiter((len(s.num_bytes) for s in sets), dtype=np.int64, count=len(sets))
    return _concatenated(sets) if sets else BufferColumns(range(0)).done(), \
        np.repeat(np.asarray(owners, dtype=np.int64), sizes)


def spliced(merged: BufferSet, owner: np.ndarray, replacements: Sequence[tuple[int, BufferSet | None]]
            ) -> tuple[BufferSet, np.ndarray]:
    """`merged_with_owners` after each (owner, set) of `replacements` (owners ascending) replaced
    that owner's rows with the set's (None: none), in place of the old: the rows of the others
    copied in runs, not set by set (a delta edit replaces a few of a plan's thousand sets)."""
    free_at = np.concatenate([[0], np.cumsum(merged.free_count)])
    fields: list[list[np.ndarray]] = [[] for _ in range(6)]
    kept = 0
    for h, new in replacements:
        lo, hi = int(np.searchsorted(owner, h, "left")), int(np.searchsorted(owner, h, "right"))
        _add_rows(fields, merged, owner, free_at, kept, lo)
        if new is not None and len(new.num_bytes):
            for found, values in zip(fields, (new.device, new.num_bytes, new.alloc_task, new.free_count,
                                              new.free_tasks, np.full(len(new.num_bytes), h, dtype=np.int64))):
                found.append(values)
        kept = hi
    _add_rows(fields, merged, owner, free_at, kept, len(owner))
    arrays = [np.concatenate(found) for found in fields]
    return BufferSet(*arrays[:5]), arrays[5]


def _add_rows(fields: list[list[np.ndarray]], merged: BufferSet, owner: np.ndarray, free_at: np.ndarray,
              lo: int, hi: int) -> None:
    rows = slice(lo, hi)
    for found, values in zip(fields, (merged.device[rows], merged.num_bytes[rows], merged.alloc_task[rows],
                                      merged.free_count[rows], merged.free_tasks[free_at[lo]:free_at[hi]],
                                      owner[rows])):
        found.append(values)


def _concatenated(sets: Sequence[BufferSet]) -> BufferSet:
    if len(sets) == 1:
        return sets[0]
    return BufferSet(np.concatenate([s.device for s in sets]), np.concatenate([s.num_bytes for s in sets]),
                     np.concatenate([s.alloc_task for s in sets]), np.concatenate([s.free_count for s in sets]),
                     np.concatenate([s.free_tasks for s in sets]))


def _merged(buffers: Sequence[Buffer] | Sequence[BufferSet]) -> list[BufferSet]:
    if all(type(b) is BufferSet for b in buffers):
        return list(buffers)
    sets = [b for b in buffers if isinstance(b, BufferSet)]
    loose = [b for b in buffers if isinstance(b, Buffer)]
    if loose:
        sets.append(BufferSet.of(loose))
    return sets


def _lives(s: BufferSet, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(allocation time, free time) of every buffer (resident ones: -inf, +inf)."""
    t_alloc = np.where(s.alloc_task >= 0, start[np.maximum(s.alloc_task, 0)], -np.inf) if len(start) \
        else np.full(len(s.alloc_task), -np.inf)
    t_free = np.full(len(s.num_bytes), np.inf)
    has_free = s.free_count > 0
    if has_free.any():
        offsets = np.concatenate([[0], np.cumsum(s.free_count)[:-1]])[has_free]
        t_free[has_free] = np.maximum.reduceat(end[s.free_tasks], offsets)
    return t_alloc, t_free


def _peaks(sets: list[BufferSet], start: np.ndarray, end: np.ndarray, num_devices: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """(peak bytes, the instant of the peak) per device: the resident bytes, plus the highest
    running sum of the others' allocations (+) and frees (-) in time order, a free first at a tie;
    the instant is the first event at that height (-inf: resident bytes only). Compiled, device
    by device (a delta simulation's result computes it after every change)."""
    if not sets:
        return np.zeros(num_devices), np.full(num_devices, -np.inf)
    m = _concatenated(sets)
    ints = [np.ascontiguousarray(a, dtype=np.int64) for a in (m.device, m.alloc_task, m.free_count, m.free_tasks)]
    return _peaks_kernel(ints[0], np.ascontiguousarray(m.num_bytes, dtype=np.float64), ints[1], ints[2], ints[3],
                         np.ascontiguousarray(start, dtype=np.float64), np.ascontiguousarray(end, dtype=np.float64),
                         num_devices)


@njit(cache=True)
def _peaks_kernel(device, num_bytes, alloc_task, free_count, free_tasks, start, end,
                  num_devices):  # pragma: no cover - compiled
    """_peaks over one merged set, compiled: resident bytes added in buffer order; each device's
    events (its timed buffers' frees, then their allocations, each in buffer order) sorted stably
    by time, so a free comes first at a tie; one running sum carried over the devices in turn."""
    nb = num_bytes.size
    peaks = np.zeros(num_devices)
    instants = np.full(num_devices, -np.inf)
    per_device = np.zeros(num_devices + 1, dtype=np.int64)
    for i in range(nb):
        if alloc_task[i] < 0:
            peaks[device[i]] += num_bytes[i]
        else:
            per_device[device[i] + 1] += 1
    for d in range(num_devices):
        per_device[d + 1] += per_device[d]
    timed = np.empty(per_device[num_devices], dtype=np.int64)      # by device, in buffer order
    filled = per_device[:num_devices].copy()
    first_free = np.empty(nb + 1, dtype=np.int64)
    first_free[0] = 0
    for i in range(nb):
        first_free[i + 1] = first_free[i] + free_count[i]
        if alloc_task[i] >= 0:
            timed[filled[device[i]]] = i
            filled[device[i]] += 1
    running = 0.0
    for d in range(num_devices):
        lo, hi = per_device[d], per_device[d + 1]
        count = hi - lo
        if count == 0:
            continue
        times = np.empty(2 * count)
        deltas = np.empty(2 * count)
        for j in range(count):
            i = timed[lo + j]
            t_free = np.inf
            if free_count[i] > 0:
                t_free = -np.inf
                for f in range(first_free[i], first_free[i + 1]):
                    if end[free_tasks[f]] > t_free:
                        t_free = end[free_tasks[f]]
            times[j], deltas[j] = t_free, -num_bytes[i]
            times[count + j], deltas[count + j] = start[alloc_task[i]], num_bytes[i]
        order = np.argsort(times, kind="mergesort")
        base = running
        top, at = -np.inf, 0
        for j in range(2 * count):
            running += deltas[order[j]]
            if running > top:
                top, at = running, order[j]
        peaks[d] += max(0.0, top - base)
        instants[d] = times[at]
    return peaks, instants
