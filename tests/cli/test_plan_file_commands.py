"""`stratagem simulate`, `explain` and `diff` on plan files (and FRONTIER.json:INDEX)."""

from __future__ import annotations

import json

from stratagem.cli import main
from stratagem.plan import Frontier, Plan
from stratagem.report.diff import diff_plans
from stratagem.report.units import format_seconds

from .images import assert_drawn


def test_simulate_reproduces_the_recorded_costs_and_writes_a_trace(plan_files, tmp_path, capsys):
    trace = tmp_path / "trace.json"
    assert main(["simulate", str(plan_files["ft"]), "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    plan = Plan.load(plan_files["ft"])
    time_line = next(line for line in out.splitlines() if "iteration time" in line)
    assert time_line.count(format_seconds(plan.iteration_time_s)) == 2      # simulated, and the plan file's
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) > len(plan.graph.ops)


def test_explain_lists_every_op_and_draws_the_strategy(plan_files, tmp_path, capsys):
    png = tmp_path / "strategy.png"
    assert main(["explain", str(plan_files["ft"]), "--picture", str(png)]) == 0
    out = capsys.readouterr().out
    plan = Plan.load(plan_files["ft"])
    assert f"{len(plan.graph.ops)} of {len(plan.graph.ops)} ops" in out
    table_ops = {line.split()[0] for line in out.splitlines() if line.split() and line.split()[0] in plan.strategy}
    assert table_ops == set(plan.strategy)
    assert "devices 0..1 left to right" in out
    assert_drawn(png, min_height=100, min_width=300)


def test_explain_sorts_by_time_and_keeps_the_top(plan_files, capsys):
    assert main(["explain", str(plan_files["dp"]), "--sort", "time", "--top", "3", "--no-text-picture"]) == 0
    out = capsys.readouterr().out
    assert "3 of " in out and "left to right" not in out


def test_diff_names_every_op_configured_differently(plan_files, capsys):
    assert main(["diff", str(plan_files["dp"]), str(plan_files["ft"])]) == 0
    out = capsys.readouterr().out
    result = diff_plans(Plan.load(plan_files["dp"]), Plan.load(plan_files["ft"]))
    assert f"{len(result.changed)} of " in out
    for change in result.changed:
        assert any(line.split()[:1] == [change.op] for line in out.splitlines())
    assert "data-parallel" in out


def test_a_frontier_file_gives_its_plans_by_index(plan_files, capsys):
    front = Frontier.load(plan_files["frontier"])
    assert main(["diff", f"{plan_files['frontier']}:0", f"{plan_files['frontier']}:-1"]) == 0
    out = capsys.readouterr().out
    cost = next(line for line in out.splitlines() if line.startswith("time (additive"))
    assert format_seconds(front[0].additive_time_s) in cost and format_seconds(front[-1].additive_time_s) in cost


def test_plan_file_errors_say_which_command_writes_one(plan_files, tmp_path, capsys):
    assert main(["simulate", str(tmp_path / "missing.json")]) == 2
    assert "stratagem plan MODEL -o plan.json" in capsys.readouterr().err
    assert main(["explain", str(plan_files["frontier"])]) == 2
    err = capsys.readouterr().err
    assert "is a frontier file" in err and ":INDEX" in err
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert main(["diff", str(broken), str(plan_files["ft"])]) == 2
    assert "not valid JSON" in capsys.readouterr().err
