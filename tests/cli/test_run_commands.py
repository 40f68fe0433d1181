"""`stratagem run` and `stratagem validate` on a plan made by `stratagem plan` for this CPU (two gloo
ranks of cpu-1x2). Each launches torchrun: seconds, not milliseconds."""

from __future__ import annotations

import json
import math

import pytest

from stratagem.cli import main
from stratagem.plan import Plan


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


def test_run_relaunches_after_a_rank_is_killed_and_says_so(cpu_plan, tmp_path, capsys, monkeypatch):
    from stratagem.runtime.worker import FAULT_ENV
    monkeypatch.setenv(FAULT_ENV, "1:0:abort-once")
    report = tmp_path / "run.json"
    assert main(["run", str(cpu_plan), "--steps", "2", "--relaunch", "1", "-o", str(report)]) == 0
    data = json.loads(report.read_text())
    assert len(data["losses"]) == 2 and len(data["failed_attempts"]) == 1
    assert "relaunched after attempt 1 failed: run on 2 ranks failed: rank 1 died without a report " \
           "(killed by signal 6)" in capsys.readouterr().out
