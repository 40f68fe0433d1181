"""diff: changed ops and cost deltas between two plans."""

from __future__ import annotations

from stratagem.report.diff import diff_plans


def test_a_plan_against_itself_changes_nothing(ft_plan):
    result = diff_plans(ft_plan, ft_plan)
    assert result.changed == () and result.same_graph
    assert all(row[3] in ("", "+0 us (+0.0%)", "+0 B (+0.0%)") for row in result.cost_table().rows)


def test_two_plans_list_every_op_configured_differently(ft_plan, dp_plan):
    result = diff_plans(dp_plan, ft_plan)
    expected = {op.name for op in ft_plan.graph.ops if ft_plan.strategy[op.name] != dp_plan.strategy[op.name]}
    assert {c.op for c in result.changed} == expected and expected
    change = result.changed[0]
    assert change.before == str(dp_plan.strategy[change.op]) and change.after == str(ft_plan.strategy[change.op])
    rows = {row[0]: row for row in result.cost_table().rows}
    assert rows["algorithm"][1:3] == ("data-parallel", "ft")
    assert result.op_table().title.startswith(f"{len(expected)} of {len(ft_plan.graph.ops)} ops")
