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
sorted orders as it goes.

`delta_simulation` (Algorithm 2) starts from the previous timeline after tasks were added, removed,
re-timed or given new predecessors, and re-simulates only the part of the timeline those edits can
reach. With key(t) = (ready(t), topo(t)), let

    k0 = min( old key of every removed or re-timed task and of every task whose predecessors
              changed,  a lower bound on the new key of every new or re-linked task u:
              (max over preds p of LB(p), topo(u)), LB(p) = new-key bound for edited p, else ready(p) )

Every task with old key < k0 keeps its times and its place (by induction over key order: its
predecessors and everything before it on its resources come before it and are unchanged), and every
task whose times change has new key >= k0. So each resource's order is cut at k0 (binary search,
the orders being sorted by key), the tail is replayed by Algorithm 1 from the prefix's last end
times, and appended after the cut. The work is proportional to the part of the iteration after the
first edit, not to the task graph. A replayed task that would land before k0 (the bound violated)
makes the kernel report failure and the caller runs Algorithm 1 over everything instead; the
property test checks delta against full on random edits.

Per-resource orders live in one pool array: resource r owns pool[order_ptr[r] : + order_cap[r]],
of which the first order_cnt[r] are used (`stratagem.sim.store.TaskStore` manages capacity).
Compiled with numba; `reference_full_simulation` is the plain-Python oracle.
"""

from __future__ import annotations

import heapq

import numpy as np
from numba import njit

NO_TASK = -1
TOPO_MIN = np.iinfo(np.int64).min     # below every structural key (full simulation's bound)
TOPO_MAX = np.iinfo(np.int64).max


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
def _drain(k_ready, k_topo, heap, waiting, last_end, duration, topo, res_ptr, res_cnt, res_pool,
           succ_ptr, succ_cnt, succ_pool, order_ptr, order_cnt, order_pool, ready, start, end):
    """Algorithm 1's event loop: pop the least (ready, topo) task, start it when its resources are
    free, append it to their orders, release its successors. Returns the tasks simulated, or -1
    when a task's key is below (k_ready, k_topo) (delta's bound violated)."""
    done = 0
    while len(heap) > 0:
        r_t, k_t, t = heapq.heappop(heap)
        if r_t < k_ready or (r_t == k_ready and k_t < k_topo):
            return -1
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
def full_simulation(alive, duration, topo, res_ptr, res_cnt, res_pool, pred_cnt, succ_ptr, succ_cnt,
                    succ_pool, order_ptr, order_cnt, order_pool, ready, start, end):
    """Algorithm 1. Fills ready/start/end and the per-resource orders; returns tasks simulated."""
    n = alive.size
    waiting = pred_cnt.copy()
    for r in range(order_cnt.size):
        order_cnt[r] = 0
    last_end = np.zeros(order_cnt.size)
    heap = [(0.0, np.int64(0), np.int64(0))]
    heap.pop()
    for t in range(n):
        if alive[t]:
            ready[t] = 0.0
            if waiting[t] == 0:
                heapq.heappush(heap, (0.0, topo[t], np.int64(t)))
    return _drain(-np.inf, TOPO_MIN, heap, waiting, last_end, duration, topo, res_ptr, res_cnt, res_pool,
                  succ_ptr, succ_cnt, succ_pool, order_ptr, order_cnt, order_pool, ready, start, end)


@njit(cache=True)
def edit_bound(edited, new_flag, bound_flag, bound_ready, seed_ready, seed_topo, ready, topo,
               pred_ptr, pred_cnt, pred_pool):
    """k0 of the module docstring: `edited` are the new and re-linked tasks in topological order
    (new_flag marks new ones); (seed_ready, seed_topo) is the least old key of removed and re-timed
    tasks. Returns k0 as (ready, topo)."""
    k_ready, k_topo = seed_ready, seed_topo
    for u in edited:
        lb = 0.0
        for j in range(pred_cnt[u]):
            p = pred_pool[pred_ptr[u] + j]
            b = bound_ready[p] if bound_flag[p] else ready[p]
            if b > lb:
                lb = b
        bound_flag[u] = True
        bound_ready[u] = lb
        if lb < k_ready or (lb == k_ready and topo[u] < k_topo):
            k_ready, k_topo = lb, topo[u]
        if not new_flag[u]:
            if ready[u] < k_ready or (ready[u] == k_ready and topo[u] < k_topo):
                k_ready, k_topo = ready[u], topo[u]
    for u in edited:
        bound_flag[u] = False
    return k_ready, k_topo


@njit(cache=True)
def delta_simulation(k_ready, k_topo, new_flag, alive, duration, topo, res_ptr, res_cnt, res_pool,
                     pred_ptr, pred_cnt, pred_pool, succ_ptr, succ_cnt, succ_pool, order_ptr,
                     order_cnt, order_pool, ready, start, end):
    """Algorithm 2 (see the module docstring): replay the timeline from key k0. Returns the number
    of tasks re-simulated, or -1 when a task would land before k0 (then run Algorithm 1)."""
    n = alive.size
    last_end = np.zeros(order_cnt.size)
    for r in range(order_cnt.size):
        cut = _find(order_pool, order_ptr[r], order_cnt[r], ready, topo, k_ready, k_topo)
        order_cnt[r] = cut
        if cut > 0:
            last_end[r] = end[order_pool[order_ptr[r] + cut - 1]]
    in_tail = np.zeros(n, dtype=np.bool_)
    for t in range(n):
        if alive[t] and (new_flag[t] or ready[t] > k_ready or (ready[t] == k_ready and topo[t] >= k_topo)):
            in_tail[t] = True
    waiting = np.zeros(n, dtype=np.int64)
    heap = [(0.0, np.int64(0), np.int64(0))]
    heap.pop()
    for t in range(n):
        if in_tail[t]:
            r_t = 0.0
            for j in range(pred_cnt[t]):
                p = pred_pool[pred_ptr[t] + j]
                if in_tail[p]:
                    waiting[t] += 1
                elif end[p] > r_t:
                    r_t = end[p]
            ready[t] = r_t
            if waiting[t] == 0:
                heapq.heappush(heap, (r_t, topo[t], np.int64(t)))
    return _drain(k_ready, k_topo, heap, waiting, last_end, duration, topo, res_ptr, res_cnt, res_pool,
                  succ_ptr, succ_cnt, succ_pool, order_ptr, order_cnt, order_pool, ready, start, end)


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
