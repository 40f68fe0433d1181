import dataclasses

import numpy as np
from hypothesis import given, settings, strategies as st

from stratagem.sim.memory import Buffer, BufferColumns, BufferSet, peak_memory


def test_peak_counts_overlapping_buffers_and_reuses_freed_memory():
    start = np.array([0.0, 1.0, 2.0, 3.0])
    end = np.array([1.0, 2.0, 3.0, 4.0])
    buffers = [Buffer(0, 100, None),            # resident
               Buffer(0, 10, 0, (1,)),          # [0, 2)
               Buffer(0, 20, 1, (0, 2)),        # [1, 3)  overlaps the first; last free wins
               Buffer(0, 40, 3, (3,)),          # [3, 4)  after both are freed
               Buffer(1, 5, 0)]                 # device 1, until the end
    peaks = peak_memory(buffers, start, end, 2)
    assert peaks[0] == 100 + 40
    assert peaks[1] == 5


def test_a_free_and_an_alloc_at_the_same_instant_do_not_stack():
    start = np.array([0.0, 2.0])
    end = np.array([2.0, 3.0])
    buffers = [Buffer(0, 30, 0, (0,)), Buffer(0, 30, 1, (1,))]     # freed at 2.0, allocated at 2.0
    assert peak_memory(buffers, start, end, 1)[0] == 30


def test_the_peak_instant_and_the_bytes_live_then_give_the_peak():
    from stratagem.sim.memory import BufferSet, live_bytes, peak_memory_and_instants
    start = np.array([0.0, 1.0, 2.0, 3.0])
    end = np.array([1.0, 2.0, 3.0, 4.0])
    buffers = [Buffer(0, 100, None), Buffer(0, 10, 0, (1,)), Buffer(0, 20, 1, (0, 2)), Buffer(0, 25, 3, (3,))]
    assert peak_memory_and_instants(buffers, start, end, 1)[1][0] == 1.0          # 100 + 10 + 20 from t = 1
    live = live_bytes(BufferSet.of(buffers), start, end, 0, 1.0)
    assert live == peak_memory(buffers, start, end, 1)[0] == 130
    assert live_bytes(BufferSet.of(buffers), start, end, 0, 3.5) == 125


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3)), min_size=1, max_size=12),
       st.data())
def test_peaks_and_their_instants_are_the_most_bytes_live_at_any_allocation(devices, tasks, data):
    """Every device's peak (resident bytes, plus the most bytes live at any instant: allocated at
    or before it, freed after) and the first instant that reaches it, against evaluating every
    allocation's instant; whole bytes, so sums in any order are exact."""
    from stratagem.sim.memory import peak_memory_and_instants
    start = np.array([float(a) for a, _ in tasks])
    end = start + np.array([float(d) for _, d in tasks])
    buffers = []
    for _ in range(data.draw(st.integers(0, 14))):
        device, num_bytes = data.draw(st.integers(0, devices - 1)), data.draw(st.integers(1, 50))
        alloc = data.draw(st.none() | st.integers(0, len(tasks) - 1))
        later = [t for t in range(len(tasks)) if alloc is not None and end[t] > start[alloc]]
        frees = tuple(data.draw(st.lists(st.sampled_from(later), max_size=2))) if later else ()
        buffers.append(Buffer(device, num_bytes, alloc, frees))
    peaks, instants = peak_memory_and_instants(buffers, start, end, devices)
    for d in range(devices):
        mine = [b for b in buffers if b.device == d]
        resident = sum(b.num_bytes for b in mine if b.alloc_task is None)
        lives = [(start[b.alloc_task], max((end[t] for t in b.free_tasks), default=np.inf), b.num_bytes)
                 for b in mine if b.alloc_task is not None]
        live_at = {at: sum(n for a, f, n in lives if a <= at < f) for at, _, _ in lives}
        most = max(live_at.values(), default=0)
        assert peaks[d] == resident + most
        assert instants[d] == (min(at for at, n in live_at.items() if n == most) if lives else -np.inf)


def test_the_peak_breakdown_adds_up_to_the_simulated_peak():
    """Every buffer held at the busiest device's peak, by op and edge, sums to the peak; the
    tied LM head's gathered weight is among them (tests/cost/test_model.py's graph)."""
    from stratagem.cost import CostModel
    from stratagem.sim.builder import Simulation
    from stratagem.space import Configuration
    from tests.cost.test_model import _tied
    model = CostModel(_tied(), "h100-1x8", num_devices=4)
    sim = Simulation(model, {"fc1": Configuration.of(j=4), "fc2": Configuration.of(b=4)})
    result = sim.run()
    breakdown = sim.peak_breakdown(top=100)
    assert breakdown.peak_bytes == result.peak_memory_bytes
    assert sum(b for _, b in breakdown.holders) == result.peak_memory_bytes
    assert dict(breakdown.holders)["w:fc1->fc2"] == 32 * 16 * 4
    assert breakdown.running


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 8), st.integers(1, 5), st.data())
def test_buffer_columns_list_buffers_as_adding_them_device_by_device_would(first, n, data):
    """BufferColumns (a column per kind of buffer over an op's devices) against the Buffers listed
    device by device, each device's in column order: the same BufferSet, array for array."""
    devices = range(first, first + n)
    tasks = st.integers(0, 50)
    columns = BufferColumns(devices)
    rows: list[list[Buffer]] = [[] for _ in devices]
    for _ in range(data.draw(st.integers(0, 4))):
        num_bytes = data.draw(st.floats(1, 1e9))
        kind = data.draw(st.sampled_from(["resident", "shared", "each", "users"]))
        alloc = data.draw(tasks) if kind != "each" else range(100, 100 + n)
        frees = [data.draw(tasks) for _ in devices]
        width = data.draw(st.integers(0, 3))
        users = np.array([[data.draw(st.sampled_from([-1, 7, 8, 9])) for _ in range(width)] for _ in devices],
                         dtype=np.int64).reshape(n, width)
        if kind == "resident":
            columns.add(num_bytes, None)
        elif kind == "shared":
            columns.add(num_bytes, alloc, frees[0])
        elif kind == "each":
            columns.add(num_bytes, alloc, frees)
        else:
            columns.add_users(num_bytes, alloc, users)
        for i, d in enumerate(devices):
            start = None if kind == "resident" else (alloc[i] if kind == "each" else alloc)
            until = {"resident": (), "shared": (frees[0],), "each": (frees[i],),
                     "users": tuple(int(u) for u in users[i] if u >= 0)}[kind]
            rows[i].append(Buffer(d, num_bytes, start, until))
    expected = BufferSet.of([b for row in rows for b in row])
    got = columns.done()
    for field in dataclasses.fields(BufferSet):
        assert np.array_equal(getattr(got, field.name), getattr(expected, field.name)), field.name
