"""The compiled engines against the plain-Python Algorithm 1, and delta against full."""

import numpy as np
from hypothesis import given, settings, strategies as st

from stratagem.sim.engine import reference_full_simulation
from stratagem.sim.store import TaskStore


def random_tasks(rng, n, resources, density=0.3, zero_fraction=0.1):
    durations = np.where(rng.random(n) < zero_fraction, 0.0, rng.integers(1, 9, n).astype(float))
    topo = np.arange(n, dtype=np.int64) * 2**21 + rng.integers(0, 2**20, n)   # increasing along dependencies
    res = [sorted(set(rng.choice(resources, size=int(rng.integers(1, 3)), replace=True).tolist()))
           for _ in range(n)]
    preds = [sorted({int(p) for p in rng.integers(0, t, size=int(rng.integers(0, 3)))}) if t else []
             for t in range(n)]
    preds = [[p for p in ps if rng.random() < density * 3] for ps in preds]
    return durations, topo, res, preds


def build(durations, topo, res, preds, resources):
    counts = np.array([len(r) for r in res])
    pcounts = np.array([len(p) for p in preds])
    flat_r = np.array([x for r in res for x in r], dtype=np.int64)
    flat_p = np.array([x for p in preds for x in p], dtype=np.int64)
    return TaskStore.from_arrays(resources, durations, topo, counts, flat_r, pcounts, flat_p)


def timeline(store):
    live = store.live
    return {int(t): (store.ready[t], store.start[t], store.end[t]) for t in live}


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 60), st.integers(1, 6), st.integers(0, 2**31))
def test_full_simulation_matches_the_reference(n, resources, seed):
    rng = np.random.default_rng(seed)
    durations, topo, res, preds = random_tasks(rng, n, resources)
    store = build(durations, topo, res, preds, resources)
    store.simulate()
    ready, start, end = reference_full_simulation(durations.tolist(), topo.tolist(), res, preds)
    assert np.allclose(store.ready[:n], ready) and np.allclose(store.start[:n], start)
    assert np.allclose(store.end[:n], end)
    for r in range(resources):     # FIFO: no two tasks overlap on a resource
        spans = sorted((store.start[t], store.end[t]) for t in range(n) if r in res[t])
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def mutate(rng, store, n_alive_before, resources):
    """Random edits: duration changes, removals, new tasks with new dependencies."""
    live = store.live.tolist()
    for t in rng.choice(live, size=min(len(live), int(rng.integers(0, 4))), replace=False):
        store.set_duration(int(t), float(rng.integers(0, 9)))
    live = store.live.tolist()
    for t in rng.choice(live, size=min(len(live) - 1, int(rng.integers(0, 3))), replace=False):
        store.remove(int(t))
    for _ in range(int(rng.integers(0, 4))):
        live = store.live.tolist()
        k = int(rng.integers(0, min(3, len(live)) + 1))
        preds = sorted({int(p) for p in rng.choice(live, size=k, replace=False)}) if k else []
        topo = int(max([store.topo[p] for p in preds], default=0)) + int(rng.integers(1, 2**20))
        res = sorted(set(rng.integers(0, resources, size=int(rng.integers(1, 3))).tolist()))
        store.add(float(rng.integers(0, 9)), res, preds, topo)


def rebuilt(store, resources):
    """A fresh store with the same live tasks, simulated from scratch."""
    live = store.live.tolist()
    index = {t: i for i, t in enumerate(live)}
    res = [store.resources_of(t).tolist() for t in live]
    preds = [sorted(index[p] for p in store.preds_of(t).tolist()) for t in live]
    fresh = build(store.duration[live], store.topo[live], res, preds, resources)
    fresh.simulate()
    return fresh, live


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 50), st.integers(1, 5), st.integers(0, 2**31), st.integers(1, 4))
def test_delta_simulation_equals_full_simulation(n, resources, seed, rounds):
    rng = np.random.default_rng(seed)
    store = build(*random_tasks(rng, n, resources), resources)
    store.simulate()
    for _ in range(rounds):
        mutate(rng, store, n, resources)
        store.update()
        fresh, live = rebuilt(store, resources)
        for i, t in enumerate(live):
            assert (store.ready[t], store.start[t], store.end[t]) == \
                   (fresh.ready[i], fresh.start[i], fresh.end[i]), f"task {t}"
        assert store.makespan() == fresh.makespan()
    assert store.fallbacks == 0        # every update was a delta replay, not Algorithm 1 again


def test_delta_replays_only_the_timeline_after_the_first_edit():
    # a chain of 10 tasks on one resource: changing the 8th re-simulates the 8th to the 10th
    store = build(np.ones(10), np.arange(10), [[0]] * 10, [[]] + [[i] for i in range(9)], 1)
    store.simulate()
    store.set_duration(7, 5.0)
    assert store.update() == 3
    assert store.makespan() == 14.0 and store.start[9] == 13.0
    assert store.update() == 0                    # nothing edited, nothing replayed


def test_a_store_takes_its_resources_as_handed_over_and_reads_each_tasks_own():
    """The resources array is the pool's data (no copy: on 16,384 GPUs it is gigabytes), each
    task reading its own run of it; a short one (under the pool's least size) is copied."""
    rng = np.random.default_rng(5)
    durations, topo, res, preds = random_tasks(rng, 40, 5)
    counts = np.array([len(r) for r in res])
    flat_r = np.array([x for r in res for x in r], dtype=np.int64)
    store = TaskStore.from_arrays(5, durations, topo, counts, flat_r, np.zeros(40, dtype=np.int64),
                                  np.zeros(0, dtype=np.int64))
    assert np.shares_memory(store.res.data, flat_r)
    assert all(store.res.get(t).tolist() == r for t, r in enumerate(res))
    short = TaskStore.from_arrays(5, durations[:3], topo[:3], np.ones(3, dtype=np.int64), np.array([0, 1, 2]),
                                  np.zeros(3, dtype=np.int64), np.zeros(0, dtype=np.int64))
    assert [short.res.get(t).tolist() for t in range(3)] == [[0], [1], [2]]
