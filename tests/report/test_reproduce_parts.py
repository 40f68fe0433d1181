"""Pieces of the reproductions that decide what a figure shows."""

from __future__ import annotations

from types import SimpleNamespace

from stratagem.report.reproduce.common import knee_index
from stratagem.report.reproduce.tensoropt import Fit, drawn_baselines, tensoropt_choice

GiB = 2 ** 30


class FakeFront(list):
    @property
    def min_memory(self):
        return min(self, key=lambda p: p.peak_memory_bytes)


def plan(time_s, peak_gib, additive_gib):
    return SimpleNamespace(iteration_time_s=time_s, peak_memory_bytes=peak_gib * GiB,
                           additive_memory_bytes=additive_gib * GiB)


def test_tensoropt_picks_by_simulated_memory_then_by_eq3_then_the_leanest():
    front = FakeFront([plan(9.0, 12, 6), plan(5.0, 16, 9), plan(3.0, 30, 20)])
    assert tensoropt_choice(front, 14 * GiB).iteration_time_s == 9.0
    assert tensoropt_choice(front, 10 * GiB).iteration_time_s == 5.0      # only Eq. 3 memory fits: 9 GiB
    assert tensoropt_choice(front, 5 * GiB).iteration_time_s == 9.0       # nothing fits: the least memory
    verdicts = [Fit.of(p, 14 * GiB).verdict for p in front]
    assert verdicts == ["simulated", "Eq. 3 only", "no"]


def test_rnn_data_parallel_is_kept_off_the_plot_only():
    base = {"data-parallel": (1,), "optcnn": (2,)}
    assert drawn_baselines("rnn", base) == {"optcnn": (2,)}
    assert drawn_baselines("transformer", base) == base


def test_the_turning_point_is_the_knee_of_the_curve():
    memory = [1, 2, 3, 4, 5, 6]
    time = [10, 4, 2.5, 2.2, 2.1, 2.0]
    assert knee_index(memory, time) == 1
    assert knee_index([1, 2], [2, 1]) == 0
