import numpy as np

from stratagem.sim.memory import Buffer, peak_memory


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
