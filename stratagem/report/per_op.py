"""Measured against predicted time, op by op: where a plan's predicted step time goes wrong.

    rows, step_s, predicted_s = per_op_rows(plan, op_times)   # op_times: what the workers' timers reported
    print(per_op_table(rows, step_s, predicted_s, shown=15))

Per op, per device, as the cost model prices it (`CostModel.op_cost`, `edge_cost_in`) and as the
runtime measured it (`runtime.op_timing`, means over the timed steps: the slowest rank's for
compute, the fastest rank's for collectives, where an early rank waits for the others):

    move      forward re-scheduling of the op's inputs (the edges into it) and the gathers of the
              weights it holds sharded
    forward   its local kernel
    backward  its backward kernels, with the gathers again under the "sharded" state (the edges'
              gradient moves are counted in the step's rest)
    sync      its weights' gradient synchronization

Rows are ordered by |measured - predicted| over the four, the largest contributors first; a last
line gives what no op accounts for (the step less the ops' sums, measured; update and the rest,
predicted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stratagem.report.replay import model_of
from stratagem.plan import Plan

PHASES = ("move", "forward", "backward", "sync")
COLLECTIVE = ("move", "sync")      # phases that wait for the other ranks


@dataclass(frozen=True)
class OpRow:
    op: str
    kind: str
    predicted_s: dict[str, float]
    measured_s: dict[str, float]

    @property
    def gap_s(self) -> float:
        return sum(self.measured_s[p] - self.predicted_s[p] for p in PHASES)


def predicted_by_op(plan: Plan) -> dict[str, dict[str, float]]:
    model = model_of(plan)
    found = {op.name: dict.fromkeys(PHASES, 0.0) for op in plan.graph.ops}
    for op in plan.graph.ops:
        cost = model.op_cost(op.name, plan.strategy[op.name])
        gather_s = sum((step.time_s for step in cost.gather), 0.0)     # read with the op's inputs
        found[op.name].update(forward=cost.forward_time_s, move=gather_s, sync=cost.sync_time_s,
                              backward=cost.backward_time_s + (gather_s if cost.regather else 0.0))
    for edge in model.edges():
        found[edge.dst_op]["move"] += model.edge_cost_in(edge, plan.strategy).forward_time_s
    return found


def measured_by_op(op_times: dict[str, Any]) -> tuple[dict[str, dict[str, float]], float]:
    """Per op and phase: the slowest rank's mean for compute; for a collective (move, sync) the
    fastest rank's, since a rank that arrives early waits for the others inside it. And the
    slowest rank's step."""
    found: dict[str, dict[str, float]] = {}
    for op in {op for rank in op_times["ranks"] for op in rank["ops"]}:
        times = [rank["ops"].get(op, {}) for rank in op_times["ranks"]]
        found[op] = {phase: (min if phase in COLLECTIVE else max)(t.get(phase, 0.0) for t in times)
                     for phase in PHASES}
    return found, max(rank["step_s"] for rank in op_times["ranks"])


def per_op_rows(plan: Plan, op_times: dict[str, Any]) -> tuple[list[OpRow], float, float]:
    """(rows, largest gap first; the measured step; the predicted iteration)."""
    predicted = predicted_by_op(plan)
    measured, step_s = measured_by_op(op_times)
    rows = [OpRow(op.name, op.kind, predicted[op.name], measured.get(op.name, dict.fromkeys(PHASES, 0.0)))
            for op in plan.graph.ops]
    return sorted(rows, key=lambda r: -abs(r.gap_s)), step_s, plan.iteration_time_s


def per_op_table(rows: list[OpRow], step_s: float, predicted_step_s: float, shown: int = 15) -> str:
    def us(seconds: float) -> str:
        return f"{seconds * 1e6:,.0f}"
    header = ["op", "kind", *(f"{p} meas/pred us" for p in PHASES), "gap us"]
    lines = [[r.op, r.kind, *(f"{us(r.measured_s[p])}/{us(r.predicted_s[p])}" for p in PHASES),
              f"{r.gap_s * 1e6:+,.0f}"] for r in rows[:shown]]
    measured_ops = sum(sum(r.measured_s[p] for p in PHASES) for r in rows)
    predicted_ops = sum(sum(r.predicted_s[p] for p in PHASES) for r in rows)
    rest = ["(the rest of the step)", "", "", "", "", "",
            f"{((step_s - measured_ops) - (predicted_step_s - predicted_ops)) * 1e6:+,.0f}"]
    table = [header, *lines, rest]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    text = "\n".join("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                     for row in table)
    more = f"\n... and {len(rows) - shown} more ops" if len(rows) > shown else ""
    return (f"{text}{more}\nstep: measured {us(step_s)} us, predicted {us(predicted_step_s)} us; "
            f"ops account for {us(measured_ops)} us measured, {us(predicted_ops)} us predicted")
