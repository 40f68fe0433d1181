"""The event engine: full simulation (FlexFlow Algorithm 1) and delta simulation (Algorithm 2).

Tasks run on resources (a GPU, or the links a transfer or collective occupies; a task may hold
several at once and starts only when all are free). Each resource serves its tasks FIFO in the
order of their ready times (FlexFlow assumption A3); ties are broken by a structural key `topo`
that increases along every dependency, so the timeline is unique:

    ready(t) = max(end(p) for p in preds(t))          (0 with no predecessors)
    order_r  = tasks on resource r sorted by (ready, topo)
    start(t) = max(ready(t), end of t's predecessor in order_r for every r of t)
    end(t)   = start(t) + duration(t)

`full_simulation` (Algorithm 1) dequeues ready tasks from a heap keyed (ready, topo); by
induction it dequeues in key order, so appending each task to its resources' orders builds the
sorted orders as it goes. `delta_simulation` (Algorithm 2) starts from a previous timeline after
tasks were added, removed or changed: a worklist (heap by (ready, topo)) recomputes a task's ready
time, moves it within its resources' orders when that changed (its old and new successors there
become dirty), recomputes start and end, and marks its dependants and next-on-resource tasks dirty
when they changed. It ends at the same fixed point as a full simulation (property-tested).

Per-resource orders live in one pool array: resource r owns pool[order_ptr[r] : + order_cap[r]],
of which the first order_cnt[r] are used (`stratagem.sim.store.TaskStore` manages capacity).
Compiled with numba; `reference_full_simulation` is the plain-Python oracle.
"""

from __future__ import annotations

import heapq

import numpy as np
from numba import njit

NO_TASK = -1


@njit(cache=True)
def _less(ready, topo, a, r_b, t_b):
    return ready[a] < r_b or (ready[a] == r_b and topo[a] < t_b)


@njit(cache=True)
def _find(pool, ptr, cnt, ready, topo, r_key, t_key):
    """First position in the resource's order whose key is >= (r_key, t_key)."""
    lo = 0
    hi = cnt
    while lo < hi:
        mid = (lo + hi) // 2
        if _less(ready, topo, pool[ptr + mid], r_key, t_key):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def count_per_resource(n_res, alive, res_ptr, res_cnt, res_pool):
    counts = np.zeros(n_res, dtype=np.int64)
    for t in range(alive.size):
        if alive[t]:
            for j in range(res_cnt[t]):
                counts[res_pool[res_ptr[t] + j]] += 1
    return counts


@njit(cache=True)
def full_simulation(alive, duration, topo, res_ptr, res_cnt, res_pool, pred_cnt, succ_ptr, succ_cnt,
                    succ_pool, order_ptr, order_cnt, order_pool, ready, start, end):
    """Algorithm 1. Fills ready/start/end and the per-resource orders; returns tasks simulated."""
    n = alive.size
    waiting = pred_cnt.copy()
    for r in range(order_cnt.size):
        order_cnt[r] = 0
    last_end = np.zeros(order_cnt.size)
    heap = [(0.0, 0.0, np.int64(0))]
    heap.pop()
    for t in range(n):
        if alive[t]:
            ready[t] = 0.0
            if waiting[t] == 0:
                heapq.heappush(heap, (0.0, topo[t], np.int64(t)))
    done = 0
    while len(heap) > 0:
        r_t, _, t = heapq.heappop(heap)
        s = r_t
        for j in range(res_cnt[t]):
            r = res_pool[res_ptr[t] + j]
            if last_end[r] > s:
                s = last_end[r]
        start[t] = s
        end[t] = s + duration[t]
        for j in range(res_cnt[t]):
            r = res_pool[res_ptr[t] + j]
            last_end[r] = end[t]
            order_pool[order_ptr[r] + order_cnt[r]] = t
            order_cnt[r] += 1
        done += 1
        for j in range(succ_cnt[t]):
            u = succ_pool[succ_ptr[t] + j]
            if end[t] > ready[u]:
                ready[u] = end[t]
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(heap, (ready[u], topo[u], u))
    return done


@njit(cache=True)
def _remove_at(pool, ptr, cnt, pos):
    for i in range(pos, cnt - 1):
        pool[ptr + i] = pool[ptr + i + 1]


@njit(cache=True)
def _insert_at(pool, ptr, cnt, pos, t):
    for i in range(cnt, pos, -1):
        pool[ptr + i] = pool[ptr + i - 1]
    pool[ptr + pos] = t


@njit(cache=True)
def unlink(tasks, res_ptr, res_cnt, res_pool, order_ptr, order_cnt, order_pool, ready, topo):
    """Take tasks out of their resources' orders; return the tasks that followed them there."""
    followers = []
    for t in tasks:
        for j in range(res_cnt[t]):
            r = res_pool[res_ptr[t] + j]
            pos = _find(order_pool, order_ptr[r], order_cnt[r], ready, topo, ready[t], topo[t])
            _remove_at(order_pool, order_ptr[r], order_cnt[r], pos)
            order_cnt[r] -= 1
            if pos < order_cnt[r]:
                followers.append(order_pool[order_ptr[r] + pos])
    return followers


@njit(cache=True)
def _push(heap, in_heap, ready, topo, t):
    if not in_heap[t]:
        in_heap[t] = True
        heapq.heappush(heap, (ready[t], topo[t], np.int64(t)))


@njit(cache=True)
def delta_simulation(dirty, new_tasks, alive, duration, topo, res_ptr, res_cnt, res_pool, pred_ptr,
                     pred_cnt, pred_pool, succ_ptr, succ_cnt, succ_pool, order_ptr, order_cnt,
                     order_pool, ready, start, end, in_heap):
    """Algorithm 2. `new_tasks` are not yet in any order; `dirty` need recomputing. Returns the
    number of task updates processed."""
    heap = [(0.0, 0.0, np.int64(0))]
    heap.pop()
    for t in new_tasks:
        r_new = 0.0
        for j in range(pred_cnt[t]):
            p = pred_pool[pred_ptr[t] + j]
            if end[p] > r_new:
                r_new = end[p]
        ready[t] = r_new
        start[t] = -1.0
        end[t] = -1.0
        for j in range(res_cnt[t]):
            r = res_pool[res_ptr[t] + j]
            pos = _find(order_pool, order_ptr[r], order_cnt[r], ready, topo, ready[t], topo[t])
            _insert_at(order_pool, order_ptr[r], order_cnt[r], pos, t)
            order_cnt[r] += 1
            if pos + 1 < order_cnt[r]:
                _push(heap, in_heap, ready, topo, order_pool[order_ptr[r] + pos + 1])
        _push(heap, in_heap, ready, topo, t)
    for t in dirty:
        if alive[t]:
            _push(heap, in_heap, ready, topo, t)
    steps = 0
    while len(heap) > 0:
        _, _, t = heapq.heappop(heap)
        in_heap[t] = False
        if not alive[t]:
            continue
        steps += 1
        r_new = 0.0
        for j in range(pred_cnt[t]):
            p = pred_pool[pred_ptr[t] + j]
            if end[p] > r_new:
                r_new = end[p]
        if r_new != ready[t]:
            for j in range(res_cnt[t]):
                r = res_pool[res_ptr[t] + j]
                ptr = order_ptr[r]
                pos = _find(order_pool, ptr, order_cnt[r], ready, topo, ready[t], topo[t])
                _remove_at(order_pool, ptr, order_cnt[r], pos)
                order_cnt[r] -= 1
                if pos < order_cnt[r]:
                    _push(heap, in_heap, ready, topo, order_pool[ptr + pos])
            ready[t] = r_new
            for j in range(res_cnt[t]):
                r = res_pool[res_ptr[t] + j]
                ptr = order_ptr[r]
                pos = _find(order_pool, ptr, order_cnt[r], ready, topo, ready[t], topo[t])
                _insert_at(order_pool, ptr, order_cnt[r], pos, t)
                order_cnt[r] += 1
                if pos + 1 < order_cnt[r]:
                    _push(heap, in_heap, ready, topo, order_pool[ptr + pos + 1])
        s = ready[t]
        for j in range(res_cnt[t]):
            r = res_pool[res_ptr[t] + j]
            ptr = order_ptr[r]
            pos = _find(order_pool, ptr, order_cnt[r], ready, topo, ready[t], topo[t])
            if pos > 0:
                prev = order_pool[ptr + pos - 1]
                if end[prev] > s:
                    s = end[prev]
        e = s + duration[t]
        if s != start[t] or e != end[t]:
            start[t] = s
            end[t] = e
            for j in range(succ_cnt[t]):
                _push(heap, in_heap, ready, topo, succ_pool[succ_ptr[t] + j])
            for j in range(res_cnt[t]):
                r = res_pool[res_ptr[t] + j]
                ptr = order_ptr[r]
                pos = _find(order_pool, ptr, order_cnt[r], ready, topo, ready[t], topo[t])
                if pos + 1 < order_cnt[r]:
                    _push(heap, in_heap, ready, topo, order_pool[ptr + pos + 1])
    return steps


def reference_full_simulation(durations, topo, resources, preds):
    """Algorithm 1 in plain Python over lists: the oracle for the compiled engines."""
    n = len(durations)
    succs: list[list[int]] = [[] for _ in range(n)]
    for t, ps in enumerate(preds):
        for p in ps:
            succs[p].append(t)
    waiting = [len(p) for p in preds]
    ready = [0.0] * n
    start, end = [0.0] * n, [0.0] * n
    last_end: dict[int, float] = {}
    heap = [(0.0, topo[t], t) for t in range(n) if waiting[t] == 0]
    heapq.heapify(heap)
    while heap:
        r_t, _, t = heapq.heappop(heap)
        start[t] = max([r_t] + [last_end.get(r, 0.0) for r in resources[t]])
        end[t] = start[t] + durations[t]
        for r in resources[t]:
            last_end[r] = end[t]
        for u in succs[t]:
            ready[u] = max(ready[u], end[t])
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(heap, (ready[u], topo[u], u))
    return ready, start, end
