"""TaskStore: the task graph as flat arrays the engine runs on, mutable for delta simulation.

Tasks are slots 0..n-1 (removed ones stay as dead slots until `compact`). Each task has a
duration, a structural key `topo` (an int64, increasing along dependencies), its resources, and its
predecessors; successor lists are kept in step. Variable-length lists live in pools: task t's
resources are res_pool[res_ptr[t] : res_ptr[t] + res_cnt[t]], and likewise preds, succs and the
per-resource orders. A list that outgrows its slot moves to the end of its pool with room to grow.

`simulate()` runs the full simulation; after `add`, `remove`, `set_duration` or `add_preds`,
`update()` runs delta simulation from the previous timeline (or a full one if there is none).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from stratagem.sim import engine


class _Pool:
    """Segments of an int64 array, one per owner, each with spare capacity."""

    def __init__(self, owners: int, initial: int = 1024):
        self.data = np.full(max(initial, 16), -1, dtype=np.int64)
        self.used = 0
        self.ptr = np.zeros(owners, dtype=np.int64)
        self.cnt = np.zeros(owners, dtype=np.int64)
        self.cap = np.zeros(owners, dtype=np.int64)

    def grow_owners(self, owners: int) -> None:
        if owners > len(self.ptr):
            extra = max(owners - len(self.ptr), len(self.ptr))
            for name in ("ptr", "cnt", "cap"):
                setattr(self, name, np.concatenate([getattr(self, name), np.zeros(extra, dtype=np.int64)]))

    def _reserve(self, size: int) -> int:
        if self.used + size > len(self.data):
            self.data = np.concatenate([self.data, np.full(max(size, len(self.data)), -1, dtype=np.int64)])
        at = self.used
        self.used += size
        return at

    def assign(self, owner: int, values: Sequence[int], spare: int = 2) -> None:
        n = len(values)
        cap = n + spare
        at = self._reserve(cap)
        self.data[at:at + n] = values
        self.ptr[owner], self.cnt[owner], self.cap[owner] = at, n, cap

    def ensure(self, owner: int, extra: int) -> None:
        """Room for `extra` more entries in owner's segment (moving it if needed)."""
        cnt, cap = int(self.cnt[owner]), int(self.cap[owner])
        if cnt + extra <= cap:
            return
        values = self.get(owner).copy()
        new_cap = max(2 * cap, cnt + extra) + 4
        at = self._reserve(new_cap)
        self.data[at:at + cnt] = values
        self.ptr[owner], self.cap[owner] = at, new_cap

    def append(self, owner: int, value: int) -> None:
        self.ensure(owner, 1)
        self.data[self.ptr[owner] + self.cnt[owner]] = value
        self.cnt[owner] += 1

    def append_pairs(self, owners: np.ndarray, values: np.ndarray) -> None:
        """values[j] appended to owners[j]'s segment, for every j in order: compiled while the
        segments have room, a segment moved (`ensure`) where one has none."""
        j = 0
        while j < len(owners):
            j = _append_while_room(owners, values, j, self.ptr, self.cnt, self.cap, self.data)
            if j < len(owners):
                self.ensure(int(owners[j]), 1)

    def assign_block(self, first: int, counts: np.ndarray, values: np.ndarray, spare: int) -> None:
        """`assign` for the owners first, first + 1, ...: the i-th gets counts[i] of `values` (one
        after another) and `spare` room, their segments side by side."""
        caps = counts + spare
        at = self._reserve(int(caps.sum()))
        starts = at + np.cumsum(caps) - caps
        if len(values):
            within = np.arange(len(values)) - np.repeat(np.cumsum(counts) - counts, counts)
            self.data[np.repeat(starts, counts) + within] = values
        owners = slice(first, first + len(counts))
        self.ptr[owners], self.cnt[owners], self.cap[owners] = starts, counts, caps

    def extend(self, owner: int, values: Sequence[int]) -> None:
        """`append` of each of `values`, room made once."""
        n = len(values)
        self.ensure(owner, n)
        at = int(self.ptr[owner] + self.cnt[owner])
        self.data[at:at + n] = values
        self.cnt[owner] += n

    def get(self, owner: int) -> np.ndarray:
        return self.data[self.ptr[owner]: self.ptr[owner] + self.cnt[owner]]

    @classmethod
    def with_counts(cls, counts: np.ndarray, slack: float = 0.0, data: np.ndarray | None = None) -> "_Pool":
        """Segments of `counts` entries (and `slack` of spare room), their values still -1; or,
        given `data` of exactly their entries (no slack), those values, adopted without a copy."""
        pool = cls(len(counts), 16)
        counts = counts.astype(np.int64)
        spare = np.maximum((counts * slack).astype(np.int64), 0) + (2 if slack else 0)
        cap = counts + spare
        ends = np.cumsum(cap)
        pool.ptr = (ends - cap).astype(np.int64)
        pool.cnt, pool.cap = counts.copy(), cap.astype(np.int64)
        pool.used = int(ends[-1]) if len(ends) else 0
        if data is not None and not slack and len(data) == pool.used and len(data) >= 16:
            pool.data = np.ascontiguousarray(data, dtype=np.int64)
        else:
            pool.data = np.full(max(pool.used, 16), -1, dtype=np.int64)
            if data is not None:
                pool.data[:len(data)] = data
        return pool

    @classmethod
    def from_csr(cls, counts: np.ndarray, values: np.ndarray, slack: float = 0.0) -> "_Pool":
        """Owner o's values are the next counts[o] of `values`. Without slack the segments lie
        as they do in `values`, and the pool takes it as its data: the caller hands it over (a
        task graph's resources on 16,384 GPUs are gigabytes)."""
        if not slack:
            return cls.with_counts(np.asarray(counts), data=np.asarray(values))
        pool = cls.with_counts(counts, slack)
        # value j of owner o goes to ptr[o] + (j - offset[o]) = j + (spare before o)
        spare = pool.cap - pool.cnt
        before = np.cumsum(spare) - spare
        pool.data[np.arange(len(values)) + np.repeat(before, pool.cnt)] = values
        return pool


@njit(cache=True)
def _append_while_room(owners, values, j, ptr, cnt, cap, data):
    """values[j:] appended to their owners' segments in order, until one has no room: where
    it stopped (len(owners) when all went in)."""
    while j < len(owners):
        o = owners[j]
        if cnt[o] >= cap[o]:
            return j
        data[ptr[o] + cnt[o]] = values[j]
        cnt[o] += 1
        j += 1
    return j


@njit(cache=True)
def _discard(data, ptr, cnt, owner, value):
    """The first `value` in owner's segment taken out, the rest moved up (none: nothing)."""
    at, n = ptr[owner], cnt[owner]
    for i in range(n):
        if data[at + i] == value:
            for j in range(i, n - 1):
                data[at + j] = data[at + j + 1]
            cnt[owner] = n - 1
            return


@njit(cache=True)
def _unlink(t, pred_ptr, pred_cnt, pred_data, succ_ptr, succ_cnt, succ_data):
    """Task t out of its predecessors' successor lists and its successors' predecessor lists, its
    own lists emptied; returns its successors."""
    for i in range(pred_cnt[t]):
        _discard(succ_data, succ_ptr, succ_cnt, pred_data[pred_ptr[t] + i], t)
    successors = succ_data[succ_ptr[t]: succ_ptr[t] + succ_cnt[t]].copy()
    for u in successors:
        _discard(pred_data, pred_ptr, pred_cnt, u, t)
    pred_cnt[t] = 0
    succ_cnt[t] = 0
    return successors


@njit(cache=True)
def _unlink_many(tasks, pred_ptr, pred_cnt, pred_data, succ_ptr, succ_cnt, succ_data):
    """`_unlink` of each of `tasks` in order; their successors one after another."""
    parts = []
    total = 0
    for t in tasks:
        part = _unlink(t, pred_ptr, pred_cnt, pred_data, succ_ptr, succ_cnt, succ_data)
        parts.append(part)
        total += len(part)
    found = np.empty(total, dtype=np.int64)
    at = 0
    for part in parts:
        found[at:at + len(part)] = part
        at += len(part)
    return found


@njit(cache=True)
def _scatter_pairs(owner, value, at, data):
    """value[j] appended to owner[j]'s segment (starting at at[owner[j]]), in the order of j."""
    for j in range(len(owner)):
        o = owner[j]
        data[at[o]] = value[j]
        at[o] += 1


@njit(cache=True)
def _successors(pred_ptr, pred_cnt, pred_data, at, succ_data):
    """Each task appended to its predecessors' successor segments, tasks in increasing order."""
    for t in range(len(pred_ptr)):
        for i in range(pred_cnt[t]):
            p = pred_data[pred_ptr[t] + i]
            succ_data[at[p]] = t
            at[p] += 1


class TaskStore:
    def __init__(self, num_resources: int):
        self.num_resources = num_resources
        self.n = 0
        self._alloc(64)
        self.res, self.pred, self.succ = _Pool(64), _Pool(64), _Pool(64)
        self.order: _Pool | None = None
        self.fallbacks = 0          # delta simulations that fell back to Algorithm 1
        self._reset_edits()

    def _alloc(self, capacity: int) -> None:
        old = self.n
        arrays = {"alive": bool, "bound_flag": bool, "bound": float, "duration": float, "topo": np.int64,
                  "ready": float, "start": float, "end": float}
        for name, dtype in arrays.items():
            fresh = np.zeros(capacity, dtype=dtype)
            if hasattr(self, name):
                fresh[:old] = getattr(self, name)[:old]
            setattr(self, name, fresh)
        self.capacity = capacity

    # ---- bulk construction --------------------------------------------------------------------
    @classmethod
    def from_arrays(cls, num_resources: int, duration: np.ndarray, topo: np.ndarray,
                    res_counts: np.ndarray, res_values: np.ndarray,
                    pred_counts: np.ndarray, pred_values: np.ndarray) -> "TaskStore":
        """A store from its tasks' resources and predecessors as (counts, values one after another)."""
        owners = np.repeat(np.arange(len(duration), dtype=np.int64), np.asarray(pred_counts, dtype=np.int64))
        return cls.from_pairs(num_resources, duration, topo, res_counts, res_values, owners,
                              np.asarray(pred_values, dtype=np.int64))

    @classmethod
    def from_pairs(cls, num_resources: int, duration: np.ndarray, topo: np.ndarray,
                   res_counts: np.ndarray, res_values: np.ndarray,
                   pred_owner: np.ndarray, pred_value: np.ndarray) -> "TaskStore":
        """A store from (task, predecessor) pairs in any order: each task's predecessors in the
        order of the pairs, each task's successors in increasing order."""
        store = cls.__new__(cls)
        store.num_resources = num_resources
        n = len(duration)
        store.n = n
        store._alloc(max(n, 16))
        store.alive[:n] = True
        store.duration[:n] = duration
        if not np.issubdtype(np.asarray(topo).dtype, np.integer):
            raise TypeError(f"structural keys are integers (stratagem.sim.keys), got {np.asarray(topo).dtype}")
        store.topo[:n] = topo
        store.res = _Pool.from_csr(np.asarray(res_counts), np.asarray(res_values))
        store.pred = _Pool.with_counts(np.bincount(pred_owner, minlength=n), slack=0.25)
        _scatter_pairs(pred_owner, pred_value, store.pred.ptr.copy(), store.pred.data)
        store.succ = _Pool.with_counts(np.bincount(pred_value, minlength=n), slack=0.25)
        _successors(store.pred.ptr, store.pred.cnt, store.pred.data, store.succ.ptr.copy(), store.succ.data)
        store.order = None
        store.fallbacks = 0
        store._reset_edits()
        return store

    # ---- incremental edits (for delta simulation) ---------------------------------------------
    def add(self, duration: float, resources: Sequence[int], preds: Sequence[int], topo: int) -> int:
        t = self.n
        self._room_for(1)
        self.n += 1
        if not isinstance(topo, (int, np.integer)):
            raise TypeError(f"a structural key is an integer (stratagem.sim.keys), got {topo!r}")
        self.alive[t], self.duration[t], self.topo[t] = True, duration, topo
        self.res.assign(t, list(resources), spare=0)
        self.pred.assign(t, list(preds))
        self.succ.assign(t, [])
        for p in preds:
            self.succ.append(p, t)
        if self.order is not None:       # room in their orders made before the next update (`_make_room`)
            self._pending.append(np.asarray(resources, dtype=np.int64))
            self._new_set.add(t)
        return t

    def add_many(self, duration: float, resources: np.ndarray, preds: list[list[int]], topo: np.ndarray) -> range:
        """`add` of one task per entry of `resources` (the i-th holding resources[i] alone, after
        preds[i], with key topo[i]), in one go: the same tasks, lists and orders as adding them
        one by one."""
        k = len(resources)
        first = self.n
        self._room_for(k)
        tasks = slice(first, first + k)
        self.n += k
        self.alive[tasks], self.duration[tasks], self.topo[tasks] = True, duration, topo
        self.res.assign_block(first, np.ones(k, dtype=np.int64), resources, spare=0)
        counts = np.fromiter((len(p) for p in preds), dtype=np.int64, count=k)
        owners = np.fromiter((q for p in preds for q in p), dtype=np.int64, count=int(counts.sum()))
        self.pred.assign_block(first, counts, owners, spare=2)
        self.succ.assign_block(first, np.zeros(k, dtype=np.int64), owners[:0], spare=2)
        self.succ.append_pairs(owners, np.repeat(np.arange(first, first + k, dtype=np.int64), counts))
        if self.order is not None:
            self._pending.append(resources)
            self._new_set.update(range(first, first + k))
        return range(first, first + k)

    def _room_for(self, count: int) -> None:
        """Capacity, and owners in every pool, for `count` more tasks."""
        while self.n + count > self.capacity:
            self._alloc(2 * self.capacity)
        if self.n + count > len(self.succ.ptr):
            for pool in (self.res, self.pred, self.succ):
                pool.grow_owners(self.capacity)

    def remove_many(self, tasks: Sequence[int]) -> None:
        """`remove` of each of `tasks`, in order, in one go."""
        tasks = [t for t in dict.fromkeys(tasks) if self.alive[t]]
        if not tasks:
            return
        old = [t for t in tasks if t not in self._new_set]
        self._new_set.difference_update(tasks)
        if old:
            old_ids = np.asarray(old, dtype=np.int64)
            least = old_ids[np.lexsort((self.topo[old_ids], self.ready[old_ids]))[0]]
            self._seed(int(least))
        ids = np.asarray(tasks, dtype=np.int64)
        successors = _unlink_many(ids, self.pred.ptr, self.pred.cnt, self.pred.data, self.succ.ptr, self.succ.cnt,
                                  self.succ.data)
        self._relinked.update(successors.tolist())
        self.alive[ids] = False

    def remove(self, t: int) -> None:
        self.remove_many([t])

    def link(self, targets: np.ndarray, sources: np.ndarray) -> None:
        """targets[j] after sources[j] for every j (`add_preds` pair by pair, in one go)."""
        self.pred.append_pairs(targets, sources)
        self.succ.append_pairs(sources, targets)
        self._relinked.update(targets.tolist())

    def add_preds(self, t: int, preds: Sequence[int]) -> None:
        if len(preds):
            self.pred.extend(t, preds)
        for p in preds:
            self.succ.append(p, t)
        self._relinked.add(t)

    def set_duration(self, t: int, duration: float) -> None:
        if self.duration[t] != duration:
            self.duration[t] = duration
            if t not in self._new_set:
                self._seed(t)

    def _make_room(self) -> None:
        """Room in each resource's order for the tasks added on it since the last simulation."""
        if self._pending:
            added = np.bincount(np.concatenate(self._pending), minlength=self.num_resources)
            order = self.order
            short = np.flatnonzero(order.cnt[:len(added)] + added > order.cap[:len(added)])
            for r in short.tolist():
                order.ensure(r, int(added[r]))

    def _seed(self, t: int) -> None:
        """Remember the least old key among edited tasks (delta simulation restarts there)."""
        key = (float(self.ready[t]), int(self.topo[t]))
        self._seed_key = min(self._seed_key, key)

    def _reset_edits(self) -> None:
        self._new_set: set[int] = set()
        self._relinked: set[int] = set()
        self._seed_key = (np.inf, int(engine.TOPO_MAX))
        self._pending: list[np.ndarray] = []     # resources of the tasks added since the last simulation

    # ---- simulation ---------------------------------------------------------------------------
    def simulate(self) -> int:
        """Full simulation from scratch (Algorithm 1); returns the number of tasks simulated."""
        n = self.n
        counts = engine.count_per_resource(self.num_resources, self.alive[:n], self.res.ptr[:n],
                                           self.res.cnt[:n], self.res.data)
        self.order = _Pool.with_counts(counts, slack=0.5)     # the simulation fills each resource's order
        done = engine.full_simulation(self.alive[:n], self.duration[:n], self.topo[:n], self.res.ptr[:n],
                                      self.res.cnt[:n], self.res.data, self.pred.cnt[:n].copy(),
                                      self.succ.ptr[:n], self.succ.cnt[:n], self.succ.data,
                                      self.order.ptr, self.order.cnt, self.order.data,
                                      self.ready[:n], self.start[:n], self.end[:n])
        if done != int(self.alive[:n].sum()):
            raise RuntimeError(f"task graph has a cycle: simulated {done} of {int(self.alive[:n].sum())}")
        self._reset_edits()
        return done

    def update(self) -> int:
        """Delta simulation (Algorithm 2) of the edits since the last simulation; returns the number
        of tasks re-simulated."""
        if self.order is None:
            return self.simulate()
        self._make_room()
        n = self.n
        new_flag = np.zeros(n, dtype=bool)
        new = [t for t in self._new_set if self.alive[t]]
        new_flag[new] = True
        edited = sorted((t for t in self._relinked | set(new) if t < n and self.alive[t]),
                        key=lambda t: self.topo[t])
        k_ready, k_topo = engine.edit_bound(np.array(edited, dtype=np.int64), new_flag,
                                            self.bound_flag[:n], self.bound[:n], *self._seed_key,
                                            self.ready[:n], self.topo[:n],
                                            self.pred.ptr[:n], self.pred.cnt[:n], self.pred.data)
        if k_ready == np.inf:
            self._reset_edits()
            return 0
        done = engine.delta_simulation(k_ready, k_topo, new_flag, self.alive[:n], self.duration[:n],
                                       self.topo[:n], self.res.ptr[:n], self.res.cnt[:n], self.res.data,
                                       self.pred.ptr[:n], self.pred.cnt[:n], self.pred.data,
                                       self.succ.ptr[:n], self.succ.cnt[:n], self.succ.data,
                                       self.order.ptr, self.order.cnt, self.order.data,
                                       self.ready[:n], self.start[:n], self.end[:n])
        if done < 0:
            self.fallbacks += 1
            return self.simulate()
        self._reset_edits()
        return done

    # ---- results ------------------------------------------------------------------------------
    @property
    def live(self) -> np.ndarray:
        return np.flatnonzero(self.alive[:self.n])

    def makespan(self) -> float:
        live = self.alive[:self.n]
        return float(self.end[:self.n][live].max()) if live.any() else 0.0

    def resources_of(self, t: int) -> np.ndarray:
        return self.res.get(t)

    def preds_of(self, t: int) -> np.ndarray:
        return self.pred.get(t)
