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
