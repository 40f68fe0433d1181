"""The task graph being built: tasks in the engine's store (`TaskStore`), what reports need of each
(its label, category, op, bytes moved), and the link resources a communication step holds.

Resources: device d is resource d; link l of the cluster is resource N + l (FlexFlow §5.1: links
are devices). A collective step on a group holds the links of its ring (i -> i+1 around the group);
a p2p step the route's. Where the cluster's runtime makes a rank wait for its collectives
(`ClusterSpec.overlap_compute` False, stratagem.runtime's way) a step also holds the devices of its
groups, so a device computes or communicates, one at a time; otherwise computation and
communication overlap where dependencies allow (FlexFlow's dataflow assumption).

Task producers (`stratagem.sim.producers`) add and remove tasks only through `add`, `add_preds` and
`remove`; the timeline is the store's (`simulate`, `update`). A full build collects tasks in lists
(`_Pending`) and makes the store from them in one go the first time it is asked for
(`TaskStore.from_arrays`); edits after that (delta simulation) go to the store one by one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stratagem.sim.store import TaskStore
from stratagem.sim.trace import TraceTask

CATEGORIES = ("forward", "backward", "update", "sync", "reschedule", "gather")
COMPUTE = 3          # categories below this index run on devices


@dataclass(frozen=True)
class TaskMeta:
    label: str
    category: str
    op: str
    num_bytes: float = 0.0


class _Pending:
    """Tasks of a build not yet in a store: per task its duration, key, resources, predecessors."""

    def __init__(self):
        self.duration: list[float] = []
        self.topo: list[int] = []
        self.resources: list[list[int]] = []
        self.preds: list[list[int]] = []

    def add(self, duration: float, resources: list[int], preds: list[int], key: int) -> int:
        if not isinstance(key, (int, np.integer)):
            raise TypeError(f"a structural key is an integer (stratagem.sim.keys), got {key!r}")
        self.duration.append(duration)
        self.topo.append(int(key))
        self.resources.append(resources)
        self.preds.append(preds)
        return len(self.duration) - 1

    def store(self, num_resources: int) -> TaskStore:
        if not self.duration:
            return TaskStore(num_resources)
        return TaskStore.from_arrays(num_resources, np.asarray(self.duration, dtype=float),
                                     np.asarray(self.topo, dtype=np.int64), *_csr(self.resources), *_csr(self.preds))


def _csr(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(length of each list, their items one after another)."""
    counts = np.fromiter((len(xs) for xs in lists), dtype=np.int64, count=len(lists))
    return counts, np.fromiter((x for xs in lists for x in xs), dtype=np.int64, count=int(counts.sum()))


class TaskGraph:
    def __init__(self, cluster):
        self.cluster = cluster
        self.num_devices = cluster.num_devices
        self.num_resources = self.num_devices + len(cluster.links)
        self._store: TaskStore | None = None
        self._pending: _Pending | None = _Pending()
        self.meta: dict[int, TaskMeta] = {}
        self._category = np.zeros(1024, dtype=np.int8)     # per task: index into CATEGORIES
        self._device = np.zeros(1024, dtype=np.int64)      # per task: its device (compute tasks)
        self._bytes = np.zeros(1024)                       # per task: bytes moved (communication)
        self._links: dict[tuple, tuple[int, ...]] = {}
        self.blocking = not cluster.spec.overlap_compute

    @property
    def store(self) -> TaskStore:
        if self._pending is not None:
            self._store, self._pending = self._pending.store(self.num_resources), None
        return self._store

    def add(self, duration: float, resources, preds, key: int, meta: TaskMeta) -> int:
        if self._pending is not None:
            t = self._pending.add(float(duration), list(resources), sorted(set(preds)), key)
        else:
            t = self.store.add(float(duration), list(resources), sorted(set(preds)), key)
        self.meta[t] = meta
        if t >= len(self._category):
            grow = max(t + 1, 2 * len(self._category))
            self._category = np.resize(self._category, grow)
            self._device = np.resize(self._device, grow)
            self._bytes = np.resize(self._bytes, grow)
        self._category[t] = CATEGORIES.index(meta.category)
        self._device[t] = resources[0] if len(resources) else -1
        self._bytes[t] = meta.num_bytes
        return t

    def add_preds(self, t: int, preds) -> None:
        if self._pending is not None:
            self._pending.preds[t].extend(preds)
        else:
            self.store.add_preds(t, preds)

    def remove(self, t: int) -> None:
        self.store.remove(t)
        self.meta.pop(t, None)

    def step_resources(self, step) -> tuple[int, ...]:
        """The resources a communication step's task holds: the links its groups use, and their
        devices when a rank waits for its collectives (`blocking`)."""
        key = (step.kind, step.groups)
        if key not in self._links:
            links: set[int] = set()
            for group in step.groups:
                pairs = [group] if step.kind == "p2p" else \
                    [(group[i], group[(i + 1) % len(group)]) for i in range(len(group))] if len(group) > 1 else []
                for src, dst in pairs:
                    if src != dst:
                        links.update(self.cluster.route_ids(src, dst))
            devices = sorted({d for group in step.groups for d in group}) if self.blocking else []
            self._links[key] = tuple(devices) + tuple(sorted(self.num_devices + link for link in links))
        return self._links[key]

    # ---- what reports read --------------------------------------------------------------------
    def totals(self) -> tuple[np.ndarray, float, float]:
        """(compute busy time per device, communication time summed, communication bytes)."""
        live = self.store.live
        category = self._category[live]
        duration = self.store.duration[live]
        compute = category < COMPUTE
        busy = np.bincount(self._device[live][compute], weights=duration[compute], minlength=self.num_devices)
        return busy, float(duration[~compute].sum()), float(self._bytes[live][~compute].sum())

    def running_at(self, device: int, time_s: float) -> str:
        """The label of the compute task on `device` at `time_s`, else of the next one to start
        there ("" if none): where a device is when something happens (the memory peak)."""
        live = self.store.live
        mine = live[(self._device[live] == device) & (self._category[live] < COMPUTE)]
        if not len(mine):
            return ""
        start, end = self.store.start[mine], self.store.end[mine]
        now = mine[(start <= time_s) & (time_s < end)]
        if len(now):
            return self.meta[int(now[0])].label
        later = mine[start > time_s]
        return self.meta[int(later[np.argmin(self.store.start[later])])].label if len(later) else ""

    def trace_tasks(self):
        store = self.store
        for t in store.live:
            meta = self.meta[int(t)]
            yield TraceTask(meta.label, meta.category, tuple(int(r) for r in store.resources_of(int(t))),
                            float(store.start[t]), float(store.end[t]),
                            (("op", meta.op), ("bytes", meta.num_bytes)))

    def resource_names(self) -> tuple[str, ...]:
        names = [f"device {d} (node {self.cluster.node_of(d)})" for d in range(self.num_devices)]
        names += [f"link {link.name}" if hasattr(link, "name") else f"link {i}"
                  for i, link in enumerate(self.cluster.links)]
        return tuple(names)

    def resource_groups(self) -> tuple[str, ...]:
        return ("devices",) * self.num_devices + ("links",) * len(self.cluster.links)
