"""The pipeline schedules run over their stages (sim.schedule): the bubble of uniform stages is
the analytic (p - 1)/(m + p - 1) of the iteration for GPipe and 1F1B alike, and 1F1B holds at most
p - s micro-batches on stage s where GPipe holds all m."""

from __future__ import annotations

import pytest

from stratagem.sim.schedule import StageTimes, run_schedule, stage_order

SCHEDULES = ("gpipe", "1f1b")


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("stages", [2, 3, 4, 8])
@pytest.mark.parametrize("micro_batches", [1, 2, 3, 4, 8, 16])
def test_uniform_stages_take_the_analytic_time_and_bubble(schedule, stages, micro_batches):
    f, b = 0.003, 0.0071
    run = run_schedule([StageTimes(f, b, 0.0)] * stages, micro_batches, schedule)
    assert run.iteration_time_s == pytest.approx((micro_batches + stages - 1) * (f + b), rel=1e-12)
    bubble = (stages - 1) / (micro_batches + stages - 1)
    for s in range(stages):
        assert run.idle_fraction(s) == pytest.approx(bubble, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("stages,micro_batches", [(2, 4), (4, 4), (4, 8), (3, 2)])
def test_1f1b_holds_fewer_micro_batches_than_gpipe(stages, micro_batches):
    times = [StageTimes(0.002, 0.004, 0.0)] * stages
    gpipe = run_schedule(times, micro_batches, "gpipe")
    one_f_one_b = run_schedule(times, micro_batches, "1f1b")
    assert gpipe.in_flight == (micro_batches,) * stages
    assert one_f_one_b.in_flight == tuple(min(micro_batches, stages - s) for s in range(stages))


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_every_stage_runs_each_micro_batch_once_each_way_and_in_dependency_order(schedule):
    stages, m = 4, 6
    times = [StageTimes(0.001 * (s + 1), 0.002 * (4 - s), 0.0005, 0.0003, 0.0002) for s in range(stages)]
    run = run_schedule(times, m, schedule)
    done = {(a.stage, a.kind, a.micro_batch): a for a in run.actions}
    assert len(done) == len(run.actions) == 2 * stages * m
    for (s, kind, i), a in done.items():
        if kind == "F" and s > 0:
            assert a.start_s >= done[s - 1, "F", i].end_s + times[s - 1].send_s - 1e-15
        if kind == "B":
            before = done[s, "F", i] if s == stages - 1 else done[s + 1, "B", i]
            wait = 0.0 if s == stages - 1 else times[s].send_back_s
            assert a.start_s >= before.end_s + wait - 1e-15
    for s in range(stages):
        mine = sorted((a for a in run.actions if a.stage == s), key=lambda a: a.start_s)
        assert all(x.end_s <= y.start_s + 1e-15 for x, y in zip(mine, mine[1:]))


def test_one_micro_batch_is_the_chain_through_the_stages_and_back():
    times = [StageTimes(0.01, 0.02, 0.003, 0.001, 0.002), StageTimes(0.015, 0.025, 0.001, 0.004, 0.005),
             StageTimes(0.02, 0.03, 0.002)]
    run = run_schedule(times, 1, "1f1b")
    forward = sum(t.forward_s for t in times) + sum(t.send_s for t in times)
    backward = sum(t.backward_s for t in times) + sum(t.send_back_s for t in times)
    assert run.stage_end_s[0] == pytest.approx(forward + backward + times[0].tail_s, rel=1e-12)


def test_1f1b_order_alternates_after_its_warm_up():
    assert stage_order("1f1b", 4, 3, 0) == [("F", 0), ("F", 1), ("F", 2), ("B", 0), ("F", 3), ("B", 1),
                                            ("B", 2), ("B", 3)]
    assert stage_order("1f1b", 4, 3, 2) == [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2),
                                            ("F", 3), ("B", 3)]
    assert stage_order("gpipe", 2, 3, 1) == [("F", 0), ("F", 1), ("B", 0), ("B", 1)]
