"""TensorOpt Fig. 6 observations on the Transformer (Table 1 size) on v100-2x8 at 16 devices."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import stratagem as sg
from stratagem.search.context import context
from stratagem.search.ft_search import frontier


@pytest.fixture(scope="module")
def results():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = sg.zoo.build("transformer")
    ctx = context(graph, "v100-2x8", 16)
    front = frontier(ctx)
    return front, sg.search(graph, "v100-2x8", "data-parallel", devices=16), \
        sg.search(graph, "v100-2x8", "optcnn", devices=16)


def knee(mem: np.ndarray, time: np.ndarray) -> int:
    """Kneedle: the point farthest below the chord of the normalized curve."""
    x = (mem - mem[0]) / (mem[-1] - mem[0])
    y = (time - time[-1]) / (time[0] - time[-1])
    return int(np.argmax((1 - x) - y))


def test_frontier_has_a_clear_turning_point(results):
    front, _, _ = results
    mem = np.array([p.additive_memory_bytes for p in front])
    time = np.array([p.additive_time_s for p in front])
    assert len(front) >= 5 and np.all(np.diff(mem) > 0) and np.all(np.diff(time) < 0)
    k = knee(mem, time)
    assert 0 < k < len(front) - 1
    before, after = time[0] - time[k], time[k] - time[-1]
    assert before >= 3 * after        # time drops fast below the turning point, slowly above it
    assert mem[k] - mem[0] <= 0.5 * (mem[-1] - mem[0])


def test_optcnn_is_the_min_time_end(results):
    front, _, optcnn = results
    end = front[-1]
    assert optcnn.additive_time_s == pytest.approx(end.additive_time_s)
    assert dict(optcnn.strategy) == dict(end.strategy)


def test_data_parallel_is_dominated(results):
    """By Eq. 3's costs, as in TensorOpt Fig. 6. Simulated, data parallel's gradient all-reduce
    hides behind the backward pass, which Eq. 3 does not see: there the frontier offers data
    parallel's speed to within 10 % for under 60 % of its memory."""
    front, dp, _ = results
    assert any(p.additive_memory_bytes < dp.additive_memory_bytes and p.additive_time_s < dp.additive_time_s
               for p in front)
    assert any(p.peak_memory_bytes < 0.6 * dp.peak_memory_bytes and p.iteration_time_s < 1.1 * dp.iteration_time_s
               for p in front)


def test_simulated_costs_follow_the_additive_frontier(results):
    front, _, _ = results
    simulated = [p.peak_memory_bytes for p in front]
    assert simulated[-1] > simulated[0]
    for p in front:
        assert p.details["num_tasks"] > 0 and p.iteration_time_s > 0
