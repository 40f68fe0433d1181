"""A plan file simulates to the numbers it records."""

from __future__ import annotations

import pytest

from stratagem.plan import Plan
from stratagem.report.replay import replay
from stratagem.report.simulate_report import simulate_plan


def test_a_saved_plan_replays_to_its_recorded_costs(tiny_frontier, tmp_path):
    for i, plan in enumerate(tiny_frontier):
        plan.save(tmp_path / f"{i}.json")
        loaded = Plan.load(tmp_path / f"{i}.json")
        result = replay(loaded).result()
        assert result.iteration_time_s == pytest.approx(plan.iteration_time_s, rel=1e-9)
        assert result.peak_memory_bytes == pytest.approx(plan.peak_memory_bytes, rel=1e-9)


def test_the_simulation_report_and_its_trace(ft_plan, tmp_path):
    import json
    report = simulate_plan(ft_plan, with_trace=True)
    assert "plan file" in report.lines()[1]
    assert len(report.device_table().rows) == ft_plan.num_devices
    trace = json.loads(report.write_trace(tmp_path / "trace.json").read_text())
    assert any(e["ph"] == "X" for e in trace["traceEvents"])
