"""`stratagem run` and `stratagem validate` on a plan made by `stratagem plan` for this CPU (two gloo
ranks of cpu-1x2). Each launches torchrun: seconds, not milliseconds."""

from __future__ import annotations

import json
import math
import time

import pytest

from stratagem.cli import main
from stratagem.plan import Plan
from stratagem.report.per_op import predicted_by_op


@pytest.fixture(scope="module")
def cpu_plan(tmp_path_factory):
    path = tmp_path_factory.mktemp("run") / "lenet.json"
    assert main(["plan", "lenet-tiny", "--cluster", "cpu-1x2", "-o", str(path)]) == 0
    return path


def test_run_trains_the_plan_and_reports_beside_the_prediction(cpu_plan, tmp_path, capsys):
    report = tmp_path / "run.json"
    assert main(["run", str(cpu_plan), "--steps", "2", "--warmup", "0", "-o", str(report)]) == 0
    data = json.loads(report.read_text())
    plan = Plan.load(cpu_plan)
    assert data["world_size"] == plan.num_devices == 2 and len(data["losses"]) == 2
    assert all(math.isfinite(loss) for loss in data["losses"])
    assert data["predicted_iteration_time_s"] == pytest.approx(plan.iteration_time_s)
    assert "predicted" in capsys.readouterr().out


@pytest.mark.slow
def test_validate_sets_measured_beside_predicted(cpu_plan, tmp_path, capsys):
    report = tmp_path / "validate.json"
    assert main(["validate", str(cpu_plan), "--steps", "2", "--warmup", "0", "-o", str(report)]) == 0
    assert len(json.loads(report.read_text())["plans"]) == 1
    out = capsys.readouterr().out
    assert "measured" in out and "predicted" in out and "lenet.json" in out


def test_validate_per_op_times_every_op_on_every_rank_beside_its_prediction(cpu_plan, tmp_path, capsys):
    report = tmp_path / "validate.json"
    assert main(["validate", str(cpu_plan), "--steps", "2", "--warmup", "0", "--per-op", "2", "--shown", "100",
                 "-o", str(report)]) == 0
    data = json.loads(report.read_text())["plans"][0]
    plan = Plan.load(cpu_plan)
    assert len(data["losses"]) == 2 and len(data["op_times"]["ranks"]) == 2      # the timed steps are apart
    for rank in data["op_times"]["ranks"]:
        assert rank["steps"] == 2 and set(rank["ops"]) <= {op.name for op in plan.graph.ops}
        ops = [op for op in plan.graph.ops if op.name in rank["ops"]]
        assert all(rank["ops"][op.name]["forward"] > 0 for op in ops) and len(ops) == len(plan.graph.ops)
        assert sum(sum(p.values()) for p in rank["ops"].values()) <= rank["step_s"] * 1.05
        assert any(p["backward"] > 0 for p in rank["ops"].values())
        synced = {op for op, phases in predicted_by_op(plan).items() if phases["sync"] > 0}
        assert all(rank["ops"][op]["sync"] > 0 for op in synced)
    out = capsys.readouterr().out
    assert "per op, mean of 2 steps" in out and all(op.name in out for op in plan.graph.ops)


def test_run_relaunches_after_a_rank_is_killed_and_says_so(cpu_plan, tmp_path, capsys, monkeypatch):
    from stratagem.runtime.worker import FAULT_ENV
    monkeypatch.setenv(FAULT_ENV, "1:0:abort-once")
    report = tmp_path / "run.json"
    assert main(["run", str(cpu_plan), "--steps", "2", "--relaunch", "1", "-o", str(report)]) == 0
    data = json.loads(report.read_text())
    assert len(data["losses"]) == 2 and len(data["failed_attempts"]) == 1
    assert "relaunched after attempt 1 failed: run on 2 ranks failed: rank 1 died without a report " \
           "(killed by signal 6)" in capsys.readouterr().out


def test_run_takes_a_plan_of_a_frontier_file(tmp_path, capsys):
    front = tmp_path / "front.json"
    assert main(["frontier", "mlp-tiny", "--cluster", "cpu-1x2", "-o", str(front)]) == 0
    plans = json.loads(front.read_text())["plans"]
    report = tmp_path / "run.json"
    assert main(["run", f"{front}:-1", "--steps", "1", "-o", str(report)]) == 0
    data = json.loads(report.read_text())
    assert data["plan"] == f"{front}:-1" and len(data["losses"]) == 1
    assert data["predicted_iteration_time_s"] == pytest.approx(plans[-1]["iteration_time_s"])
    capsys.readouterr()
    assert main(["run", f"{front}:{len(plans)}", "--steps", "1"]) == 2
    assert f"no plan {len(plans)} in {front}" in capsys.readouterr().err


def test_an_unwritable_output_is_refused_before_any_work(cpu_plan, tmp_path, capsys):
    for argv in (["plan", "lenet-tiny", "--cluster", "cpu-1x2", "-o", "/proc/plan.json"],
                 ["frontier", "lenet-tiny", "--cluster", "cpu-1x2", "--plot", str(tmp_path / "f.txt")],
                 ["run", str(cpu_plan), "-o", str(tmp_path)],
                 ["run", str(cpu_plan), "--checkpoint-dir", str(cpu_plan)],
                 ["explain", str(cpu_plan), "--picture", f"{cpu_plan}/x.png"],
                 ["simulate", str(cpu_plan), "--trace", "/proc/trace.json"]):
        begin = time.monotonic()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "error:" in err and "Traceback" not in err, (argv, err)
        assert time.monotonic() - begin < 2, argv       # before capture, planning or launch
