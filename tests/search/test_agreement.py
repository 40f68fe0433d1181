"""A plan says where FT's memory and the simulated peak differ (search.agreement)."""

from __future__ import annotations

from stratagem.report.plan_summary import plan_lines
from stratagem.search.context import context, make_plan
from stratagem.search.strategies import data_parallel_strategy
from stratagem.space import Configuration
from tests.cost.graphs import mlp


def test_a_plan_on_disjoint_device_blocks_explains_the_gap_and_data_parallel_has_none():
    """FT adds every op's memory as if all ran on each device: with fc1 on devices 0-1 and fc2
    on 2-3, it counts both layers' weights and Adam state on one device; the simulator holds each
    on its own block. Data parallel puts every op on every device: the two agree."""
    ctx = context(mlp(), "h100-1x8", 4)
    dp = make_plan(ctx, data_parallel_strategy(ctx), "data-parallel")
    assert "memory_gap" not in dp.details
    assert abs(dp.additive_memory_bytes - dp.peak_memory_bytes) <= 0.02 * dp.peak_memory_bytes
    split = make_plan(ctx, {"fc1": Configuration.of(0, b=2), "fc2": Configuration.of(2, b=2)}, "by hand")
    assert split.additive_memory_bytes > 1.02 * split.peak_memory_bytes
    note = split.details["memory_gap"]
    assert "over the simulated peak" in note and "device" in note and "fc" in note
    assert any(line.startswith("  memory model") for line in plan_lines(split))
