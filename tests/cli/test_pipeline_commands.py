"""A plan with pipeline stages through the commands: planned (`--algorithm pipeline`), explained
(its stages listed), simulated again (the recorded costs, its schedule drawn and traced)."""

from __future__ import annotations

import json

from stratagem.cli import main
from stratagem.plan import Plan
from stratagem.report.units import format_seconds

from .images import assert_drawn


def test_a_pipeline_plan_is_planned_explained_and_its_schedule_drawn(tmp_path, capsys):
    path = tmp_path / "pipeline.json"
    assert main(["plan", "gpt-tiny-tiny", "--cluster", "a100-2x8", "--algorithm", "pipeline",
                 "--option", "stages=2", "--option", "micro_batches=2", "-o", str(path)]) == 0
    out = capsys.readouterr().out
    plan = Plan.load(path)
    pipe = plan.strategy.pipeline
    assert pipe.num_stages == 2 and pipe.micro_batches == 2
    assert "2 stages of 8 devices, 2 micro-batches of 1 (2 a step), 1f1b" in out

    assert main(["explain", str(path), "--no-text-picture"]) == 0
    out = capsys.readouterr().out
    assert "2 stages x 2 micro-batches (1f1b)" in out
    stage_rows = [line.split() for line in out.splitlines() if line.split()[:2] in (["0", "0-7"], ["1", "8-15"])]
    assert len(stage_rows) == 2

    png, trace = tmp_path / "schedule.png", tmp_path / "trace.json"
    assert main(["simulate", str(path), "--schedule", str(png), "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    time_line = next(line for line in out.splitlines() if "iteration time" in line)
    assert time_line.count(format_seconds(plan.iteration_time_s)) == 2
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    assert sorted(e["name"] for e in events if e["cat"] in ("forward", "backward")) == sorted(
        f"{kind}{i}" for kind in "FB" for i in range(2) for _ in range(2))
    assert_drawn(png, min_height=60, min_width=300)


def test_a_schedule_is_drawn_only_for_a_plan_with_stages(tmp_path, capsys):
    path = tmp_path / "dp.json"
    assert main(["plan", "gpt-tiny-tiny", "--cluster", "a100-1x8", "--devices", "2", "--algorithm",
                 "data-parallel", "-o", str(path)]) == 0
    assert main(["simulate", str(path), "--schedule", str(tmp_path / "s.png")]) == 2
    assert "has no pipeline stages" in capsys.readouterr().out
    assert not (tmp_path / "s.png").exists()
