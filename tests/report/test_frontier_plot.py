"""The frontier plot (TensorOpt Fig. 6) and the points behind it."""

from __future__ import annotations

import matplotlib.image
import pytest

from stratagem.report.frontier_plot import (
    FrontierPoint, baseline_points, frontier_points, frontier_table, memory_unit, write_frontier_png,
)


def test_compute_and_network_time_make_up_each_plans_time(tiny_frontier, tiny_ctx):
    points = frontier_points(tiny_frontier, tiny_ctx.model)
    for plan, point in zip(tiny_frontier, points):
        assert point.compute_time_s + point.network_time_s == pytest.approx(plan.additive_time_s)
        assert point.iteration_time_s == plan.iteration_time_s
    assert len(frontier_table(points).rows) == len(points)


def test_baselines_are_points_or_a_reason(tiny_ctx, tiny_frontier):
    made, failed = baseline_points(tiny_ctx, tiny_frontier, ["data-parallel", "optcnn"])
    assert set(made) | set(failed) == {"data-parallel", "optcnn"}
    assert made["optcnn"][0].additive_time_s == min(p.additive_time_s for p in tiny_frontier)   # OptCNN's objective


def test_the_plot_is_written_with_baselines(tmp_path):
    points = [FrontierPoint(m * 2 ** 30, 10 / m, 1.0, 10 / m - 1, m * 2 ** 30 * 1.1, 9 / m) for m in (1, 2, 4, 8)]
    baselines = {"data-parallel": (points[-1],), "mesh-tf": tuple(points[1:3])}
    path = write_frontier_png(points, baselines, tmp_path / "f.png", "synthetic", memory_cap_bytes=6 * 2 ** 30)
    assert matplotlib.image.imread(path).shape[2] in (3, 4)


def test_small_models_read_in_mib_or_kib():
    assert memory_unit(3 * 2 ** 30)[1] == "GiB" and memory_unit(3 * 2 ** 20)[1] == "MiB"
    assert memory_unit(3000)[1] == "KiB"
