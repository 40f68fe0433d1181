"""The task graph being built: tasks in the engine's store (`TaskStore`), what reports need of each
(its label, category, op, bytes moved), and the link resources a communication step holds.

Resources: device d is resource d; link l of the cluster is resource N + l (FlexFlow §5.1: links
are devices). A collective step on a group holds the links of its ring (i -> i+1 around the group);
a p2p step the route's. Where the cluster's runtime makes a rank wait for its collectives
(`ClusterSpec.overlap_compute` False, stratagem.runtime's way) a step also holds the devices of its
groups, so a device computes or communicates, one at a time; otherwise computation and
communication overlap where dependencies allow (FlexFlow's dataflow assumption).

Task producers (`stratagem.sim.producers`) add and remove tasks only through `add`,
`add_compute` (one task per device of a range, in one go), `add_preds`, `link` / `link_all`
(predecessors pair by pair) and `remove`; the timeline is the store's (`simulate`, `update`). A
full build collects durations and keys as runs (a value and how many tasks in a row have it) and
(task, predecessor) pairs in array pieces (`_Pending`), and makes the store from them in one go the
first time it is asked for (`TaskStore.from_pairs`); edits after that (delta simulation) go to the
store one by one. Of each run of tasks added together it keeps what reports read (`_Described`:
their `TaskMeta`, category, devices and bytes), not a Python object per task.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from stratagem.cluster.cluster import HOST_TRANSFERS
from stratagem.sim.memory import task_ids
from stratagem.sim.store import TaskStore
from stratagem.sim.trace import TraceTask

MANY_RESOURCES = 64  # a task holding more resources appends them as the array they come in
CATEGORIES = ("forward", "backward", "update", "sync", "reschedule", "gather", "host copy")
COMPUTE = 3          # categories below this index run on devices


@dataclass(frozen=True)
class TaskMeta:
    label: str
    category: str
    op: str
    num_bytes: float = 0.0


class _Sequence:
    """Integers appended as runs (start, start + step, ... : `length` of them), as arrays, or one
    by one, made one array at the end in the order appended. A run costs a few list appends where
    an array costs NumPy calls: an op's tasks, their keys and devices are runs."""

    def __init__(self):
        self.starts: list[int] = []
        self.steps: list[int] = []
        self.lengths: list[int] = []
        self.offsets: list[int] = []          # where each run starts in the whole
        self.arrays: list[tuple[int, np.ndarray]] = []
        self.loose: list[int] = []            # appended one by one since the last run or array
        self.total = 0                        # runs and arrays so far (loose not counted)

    def run(self, start: int, step: int, length: int) -> None:
        if length:
            self._flush()
            self.starts.append(start)
            self.steps.append(step)
            self.lengths.append(length)
            self.offsets.append(self.total)
            self.total += length

    def append_array(self, values: np.ndarray) -> None:
        if len(values):
            self._flush()
            self.arrays.append((self.total, values))
            self.total += len(values)

    def _flush(self) -> None:
        if self.loose:
            self.arrays.append((self.total, np.array(self.loose, dtype=np.int64)))
            self.total += len(self.loose)
            self.loose = []

    def array(self) -> np.ndarray:
        self._flush()
        lengths = np.asarray(self.lengths, dtype=np.int64)
        within = np.arange(self.total if not self.arrays else int(lengths.sum()), dtype=np.int64) \
            - np.repeat(np.cumsum(lengths) - lengths, lengths)
        runs = np.repeat(np.asarray(self.starts, dtype=np.int64), lengths) \
            + within * np.repeat(np.asarray(self.steps, dtype=np.int64), lengths)
        if not self.arrays:                   # runs only: one after another
            return runs
        found = np.empty(self.total, dtype=np.int64)
        found[np.repeat(np.asarray(self.offsets, dtype=np.int64), lengths) + within] = runs
        for at, values in self.arrays:
            found[at:at + len(values)] = values
        return found


def _as_run(tasks) -> tuple[int, int] | None:
    """(first, step) of a range, or of a list of consecutive increasing ints; None for anything else."""
    if isinstance(tasks, range):
        return tasks.start, tasks.step
    if isinstance(tasks, list) and tasks and tasks == list(range(tasks[0], tasks[0] + len(tasks))):
        return tasks[0], 1
    return None


class _Runs:
    """Numbers as runs (value, how many in a row), made one array at the end: a device range's
    tasks share their duration and resource count, and a list of the runs is far shorter than one
    of the tasks."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.values: list = []
        self.counts: list[int] = []

    def append(self, value, count: int = 1) -> None:
        self.values.append(value)
        self.counts.append(count)

    def array(self) -> np.ndarray:
        return np.repeat(np.asarray(self.values, dtype=self.dtype), np.asarray(self.counts, dtype=np.int64))


class _Pending:
    """Tasks of a build not yet in a store: per task its duration and key, its resources one after
    another (with their counts), and every (task, predecessor) pair in the order given, in pieces."""

    def __init__(self):
        self.n = 0
        self.duration, self.topo = _Runs(np.float64), _Sequence()
        self.res_counts, self.res_values = _Runs(np.int64), _Sequence()
        self.pred_owner, self.pred_value = _Sequence(), _Sequence()   # appended in step: a pair each

    def add(self, duration: float, resources, preds: list[int], key: int) -> int:
        """A task; `resources` a list, or an array (a step's many links: appended as a block)."""
        if not isinstance(key, (int, np.integer)):
            raise TypeError(f"a structural key is an integer (stratagem.sim.keys), got {key!r}")
        t = self.n
        self.n += 1
        self.duration.append(duration)
        self.topo.loose.append(int(key))
        self.res_counts.append(len(resources))
        if isinstance(resources, np.ndarray):
            self.res_values.append_array(resources)
        else:
            self.res_values.loose.extend(resources)
        self.add_preds(t, preds)
        return t

    def add_compute(self, duration: float, devices: range, keys: range, shared: list[int],
                    each: range | None) -> range:
        """One task per device of `devices`, the i-th holding device i, after `shared` (sorted,
        unique) and each[i] (not in `shared`) if given, its predecessors in increasing order."""
        tasks = range(self.n, self.n + len(devices))
        self.n += len(devices)
        self.duration.append(duration, len(devices))
        self.topo.run(keys.start, keys.step, len(keys))
        self.res_counts.append(1, len(devices))
        self.res_values.run(devices.start, devices.step, len(devices))
        if each is None:
            for p in shared:
                self.link_all(tasks, p)
        elif not shared:
            self.link(tasks, each)
        else:
            for t, e in zip(tasks, each):
                self.add_preds(t, sorted({e, *shared}))
        return tasks

    def add_preds(self, t: int, preds) -> None:
        """t after each of `preds` (a list, a range or an array)."""
        if not len(preds):
            return
        run = _as_run(preds)
        if run is not None:
            self._pairs((t, 0), run, len(preds))
        else:
            self.pred_owner.append_array(np.full(len(preds), t, dtype=np.int64))
            self.pred_value.append_array(task_ids(preds))

    def link(self, targets, sources) -> None:
        """targets[i] after sources[i] for every i."""
        if not len(targets):
            return
        run, source_run = _as_run(targets), _as_run(sources)
        if run is not None and source_run is not None:
            self._pairs(run, source_run, len(targets))
        else:
            self.pred_owner.append_array(task_ids(targets))
            self.pred_value.append_array(task_ids(sources))

    def link_all(self, targets, source: int) -> None:
        """Every task of `targets` after `source`."""
        if not len(targets):
            return
        run = _as_run(targets)
        if run is not None:
            self._pairs(run, (source, 0), len(targets))
        else:
            self.pred_owner.append_array(task_ids(targets))
            self.pred_value.append_array(np.full(len(targets), source, dtype=np.int64))

    def _pairs(self, owners: tuple[int, int], values: tuple[int, int], length: int) -> None:
        self.pred_owner.run(*owners, length)
        self.pred_value.run(*values, length)

    def store(self, num_resources: int) -> TaskStore:
        if not self.n:
            return TaskStore(num_resources)
        return TaskStore.from_pairs(num_resources, self.duration.array(), self.topo.array(),
                                    self.res_counts.array(), self.res_values.array(), self.pred_owner.array(),
                                    self.pred_value.array())


class _Described:
    """What reports read of the tasks, per run of tasks added together (an op's tasks of one kind
    on a device range, or one task): its first task, its `TaskMeta`, category index, bytes moved,
    and devices (the first of a range, stepping by one along the run; or one device, -1 for none,
    for every task of it). `arrays()` gives them per task; `meta(t)` finds t's run."""

    def __init__(self):
        self.first: list[int] = []
        self.count: list[int] = []
        self.meta: list[TaskMeta] = []
        self.category: list[int] = []
        self.num_bytes: list[float] = []
        self.device: list[int] = []
        self.step: list[int] = []                   # 1: a device range, 0: one device for all
        self.tasks = 0
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None     # as made, and of how many runs
        self._runs = 0

    def add(self, count: int, meta: TaskMeta, device) -> None:
        ranged = isinstance(device, range)
        self.first.append(self.tasks)
        self.count.append(count)
        self.meta.append(meta)
        self.category.append(CATEGORIES.index(meta.category))
        self.num_bytes.append(meta.num_bytes)
        self.device.append(device.start if ranged else int(device))
        self.step.append(1 if ranged else 0)
        self.tasks += count

    def task_meta(self, t: int) -> TaskMeta:
        return self.meta[bisect_right(self.first, t) - 1]

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(category, device, bytes) per task (the runs added since, appended)."""
        if self._runs < len(self.first):
            runs = slice(self._runs, len(self.first))
            counts = np.asarray(self.count[runs], dtype=np.int64)
            first = np.asarray(self.first[runs], dtype=np.int64)
            within = np.arange(int(counts.sum()), dtype=np.int64) + (first[0] if len(first) else 0) \
                - np.repeat(first, counts)
            tail = (np.repeat(np.asarray(self.category[runs], dtype=np.int8), counts),
                    np.repeat(np.asarray(self.device[runs], dtype=np.int64), counts)
                    + within * np.repeat(np.asarray(self.step[runs], dtype=np.int64), counts),
                    np.repeat(np.asarray(self.num_bytes[runs], dtype=float), counts))
            self._arrays = tail if self._arrays is None else \
                tuple(np.concatenate([old, new]) for old, new in zip(self._arrays, tail))
            self._runs = len(self.first)
        return self._arrays


class TaskGraph:
    def __init__(self, cluster, classes):
        self.cluster = cluster
        self.classes = classes                  # the simulated devices are these classes (sim.ranks)
        self.num_devices = cluster.num_devices
        # devices, links, then each device's host link one way and the other (HOST_TRANSFERS)
        self.num_resources = self.num_devices + len(cluster.links) + len(HOST_TRANSFERS) * self.num_devices
        self._store: TaskStore | None = None
        self._pending: _Pending | None = _Pending()
        self._described = _Described()          # per run of tasks: meta, category, devices, bytes
        self._links: dict[tuple, np.ndarray] = {}
        self.blocking = not cluster.spec.overlap_compute

    @property
    def store(self) -> TaskStore:
        if self._pending is not None:
            self._store, self._pending = self._pending.store(self.num_resources), None
        return self._store

    def add(self, duration: float, resources, preds, key: int, meta: TaskMeta) -> int:
        if self._pending is not None:
            many = len(resources) > MANY_RESOURCES and isinstance(resources, np.ndarray)
            t = self._pending.add(float(duration), resources if many else _listed(resources),
                                  sorted(set(preds)), key)
        else:
            t = self.store.add(float(duration), _listed(resources), sorted(set(preds)), key)
        self._describe(1, meta, resources[0] if len(resources) else -1)
        return t

    def add_compute(self, duration: float, devices: range, keys: range, meta: TaskMeta,
                    shared: list[int] = (), each=None) -> range | list[int]:
        """A compute task on each device of `devices` (the i-th with key keys[i]), after the tasks
        `shared` and, when given, after each[i]: `add` once per device, in one go. The tasks come
        back as a range while the graph is being built (they are consecutive), else as a list."""
        if self._pending is None:
            preds = [sorted({*shared, *(() if each is None else (each[i],))}) for i in range(len(devices))]
            tasks = self.store.add_many(float(duration), task_ids(devices), preds, task_ids(keys))
            self._describe(len(devices), meta, devices)
            return list(tasks)
        if not isinstance(keys, range):
            raise TypeError(f"a device range's structural keys are a range (SimState.keys), got {keys!r}")
        tasks = self._pending.add_compute(float(duration), devices, keys, sorted(set(shared)), each)
        self._describe(len(devices), meta, devices)
        return tasks

    def _describe(self, count: int, meta: TaskMeta, device) -> None:
        """What reports read of the next `count` tasks: their meta, category, device(s), bytes."""
        self._described.add(count, meta, device)

    def add_preds(self, t: int, preds) -> None:
        if self._pending is not None:
            self._pending.add_preds(t, preds)
        else:
            self.store.add_preds(t, preds)

    def link(self, targets, sources) -> None:
        """targets[i] after sources[i], for every i (`add_preds` pair by pair)."""
        if self._pending is not None:
            self._pending.link(targets, sources)
        elif len(targets):
            self.store.link(task_ids(targets), task_ids(sources))

    def link_all(self, targets, source: int) -> None:
        """Every task of `targets` after `source`."""
        if self._pending is not None:
            self._pending.link_all(targets, source)
        elif len(targets):
            self.store.link(task_ids(targets), np.full(len(targets), source, dtype=np.int64))

    def remove_many(self, tasks: list[int]) -> None:
        self.store.remove_many(tasks)

    def meta(self, t: int) -> TaskMeta:
        return self._described.task_meta(t)

    def step_resources(self, step) -> np.ndarray:
        """The resources a communication step's task holds, as a read-only int64 array: the links
        its groups use, and their devices (their classes) when a rank waits for its collectives
        (`blocking`); a host transfer holds its devices' host links."""
        key = (step.kind, step.groups)
        found = self._links.get(key)
        if found is None:
            found = self._links[key] = self._resources_of(step)
        return found

    def _resources_of(self, step) -> np.ndarray:
        host = step.kind in HOST_TRANSFERS
        classes = np.asarray(self.classes.of_devices({d for group in step.groups for d in group})
                             if host or self.blocking else [], dtype=np.int64)
        if host:
            first_host_link = self.num_devices + len(self.cluster.links) + HOST_TRANSFERS.index(step.kind) * self.num_devices
            held = classes + first_host_link
        else:
            held = self.cluster.step_link_ids(step.kind, step.groups) + self.num_devices
        found = np.concatenate([classes if self.blocking else classes[:0], held])
        found.flags.writeable = False
        return found

    # ---- what reports read --------------------------------------------------------------------
    def totals(self) -> tuple[np.ndarray, float, float]:
        """(compute busy time per device, communication time summed, communication bytes)."""
        live = self.store.live
        categories, devices, moved = self._described.arrays()
        category = categories[live]
        duration = self.store.duration[live]
        compute = category < COMPUTE
        busy = np.bincount(devices[live][compute], weights=duration[compute], minlength=self.num_devices)
        return busy, float(duration[~compute].sum()), float(moved[live][~compute].sum())

    def represented(self) -> int:
        """The iteration's tasks: a compute task per device of its class (sim.ranks), and every
        communication task once."""
        live = self.store.live
        if self.classes.every:
            return len(live)
        categories, devices, _ = self._described.arrays()
        compute = categories[live] < COMPUTE
        return int(self.classes.sizes[devices[live][compute]].sum()) + int((~compute).sum())

    def running_at(self, device: int, time_s: float) -> str:
        """The label of the compute task on `device` at `time_s`, else of the next one to start
        there ("" if none): where a device is when something happens (the memory peak)."""
        live = self.store.live
        categories, devices, _ = self._described.arrays()
        mine = live[(devices[live] == device) & (categories[live] < COMPUTE)]
        if not len(mine):
            return ""
        start, end = self.store.start[mine], self.store.end[mine]
        now = mine[(start <= time_s) & (time_s < end)]
        if len(now):
            return self.meta(int(now[0])).label
        later = mine[start > time_s]
        return self.meta(int(later[np.argmin(self.store.start[later])])).label if len(later) else ""

    def trace_tasks(self):
        store = self.store
        for t in store.live:
            meta = self.meta(int(t))
            yield TraceTask(meta.label, meta.category, tuple(int(r) for r in store.resources_of(int(t))),
                            float(store.start[t]), float(store.end[t]),
                            (("op", meta.op), ("bytes", meta.num_bytes)))

    def resource_names(self) -> tuple[str, ...]:
        names = [f"device {d} (node {self.cluster.node_of(d)})" for d in range(self.num_devices)]
        names += [f"link {link.name}" if hasattr(link, "name") else f"link {i}"
                  for i, link in enumerate(self.cluster.links)]
        names += [f"{kind.replace('_', ' ')} of device {d}" for kind in HOST_TRANSFERS for d in range(self.num_devices)]
        return tuple(names)

    def resource_groups(self) -> tuple[str, ...]:
        return ("devices",) * self.num_devices + ("links",) * (len(self.cluster.links) + len(HOST_TRANSFERS) * self.num_devices)


def _listed(resources) -> list[int]:
    """A task's resources as a list of ints (a step's come as an array)."""
    return resources.tolist() if isinstance(resources, np.ndarray) else list(resources)
