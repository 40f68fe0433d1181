"""Per-op comparison: predicted as the cost model prices each op, measured as the slowest rank's."""

from __future__ import annotations

import pytest

from stratagem.cli import main
from stratagem.plan import Plan
from stratagem.report.per_op import PHASES, per_op_rows, per_op_table, predicted_by_op


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    path = tmp_path_factory.mktemp("per_op") / "lenet.json"
    assert main(["plan", "lenet-tiny", "--cluster", "cpu-1x2", "-o", str(path)]) == 0
    return Plan.load(path)


def test_the_op_measured_furthest_from_its_prediction_comes_first(plan):
    predicted = predicted_by_op(plan)
    slow = plan.graph.ops[1].name
    ranks = []
    for rank in range(2):
        ops = {op: dict(phases) for op, phases in predicted.items()}
        if rank == 1:
            ops[slow]["forward"] += 1e-3                      # the slowest rank is the one that counts
        ranks.append({"steps": 3, "step_s": plan.iteration_time_s + 1e-3 * rank, "ops": ops})
    rows, step_s, predicted_s = per_op_rows(plan, {"ranks": ranks})
    assert rows[0].op == slow and rows[0].gap_s == pytest.approx(1e-3)
    assert all(abs(r.gap_s) < 1e-12 for r in rows[1:]) and step_s == pytest.approx(predicted_s + 1e-3)
    text = per_op_table(rows, step_s, predicted_s, shown=3)
    assert text.splitlines()[1].startswith(slow) and f"and {len(rows) - 3} more ops" in text
    assert all(f"{p} meas/pred us" in text for p in PHASES)
