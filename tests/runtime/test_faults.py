"""A rank that dies makes the whole run fail within its timeout, and the error names the rank and the
cause: an exception (the rank's own report), an exit without one (torchrun's record), and a rank
that hangs (gloo's timeout stops the others; the watchdog bounds the rest)."""

from __future__ import annotations

import time

import pytest

from stratagem.runtime.errors import RunFailed
from stratagem.runtime.launch import STARTUP_S, LaunchOptions, launch
from stratagem.runtime.worker import FAULT_ENV

from .plans import saved

TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def plan_path(tmp_path_factory):
    return saved(tmp_path_factory.mktemp("faults"), "mlp-tiny", "data-parallel", 2)


def _fail(plan_path, tmp_path, fault: str, timeout_s: float = TIMEOUT_S, relaunches: int = 0
          ) -> tuple[str, float]:
    task = {"name": "t", "plan": str(plan_path), "steps": 4}
    begin = time.monotonic()
    with pytest.raises(RunFailed) as error:
        launch([task], LaunchOptions(2, timeout_s=timeout_s, env={FAULT_ENV: fault}, relaunches=relaunches),
               tmp_path)
    return str(error.value), time.monotonic() - begin


def test_a_rank_that_raises_is_named_with_its_exception_and_step(plan_path, tmp_path):
    message, elapsed = _fail(plan_path, tmp_path, "1:2:raise")
    assert message.startswith("run on 2 ranks failed: rank 1 failed in task 't' at step 2: RuntimeError: "
                              "injected fault")
    assert elapsed < TIMEOUT_S + STARTUP_S


def test_a_rank_that_exits_without_a_word_is_named_with_its_exit_code(plan_path, tmp_path):
    message, elapsed = _fail(plan_path, tmp_path, "1:1:exit")
    assert message.startswith("run on 2 ranks failed: rank 1 died without a report (exit code 13)")
    assert elapsed < TIMEOUT_S + STARTUP_S


def test_a_rank_killed_by_a_signal_is_named_with_the_end_of_its_stderr(plan_path, tmp_path):
    """A C++ abort leaves no report: the message quotes what the rank printed and its Python stack."""
    message, elapsed = _fail(plan_path, tmp_path, "1:1:abort")
    assert message.startswith("run on 2 ranks failed: rank 1 died without a report (killed by signal 6); "
                              "its stderr ends:")
    assert "injected abort" in message and "Fatal Python error: Aborted" in message
    assert "_maybe_fault" in message           # faulthandler's stack names the function that aborted
    assert elapsed < TIMEOUT_S + STARTUP_S


def test_a_run_killed_by_a_signal_is_relaunched_and_names_the_failed_attempt(plan_path, tmp_path):
    task = {"name": "t", "plan": str(plan_path), "steps": 3}
    result = launch([task], LaunchOptions(2, timeout_s=TIMEOUT_S, env={FAULT_ENV: "1:1:abort-once"},
                                          relaunches=1), tmp_path)
    assert len(result.results["t"]["losses"]) == 3
    assert len(result.failed_attempts) == 1 and "rank 1 died without a report (killed by signal 6)" in \
        result.failed_attempts[0]


def test_a_rank_that_raises_is_never_relaunched(plan_path, tmp_path):
    task = {"name": "t", "plan": str(plan_path), "steps": 3}
    with pytest.raises(RunFailed) as error:
        launch([task], LaunchOptions(2, timeout_s=TIMEOUT_S, env={FAULT_ENV: "1:1:raise"}, relaunches=2),
               tmp_path)
    assert "after attempt" not in str(error.value)
    assert len(list((tmp_path / "logs").iterdir())) == 1          # one torchrun launch


def test_relaunches_stop_after_the_last_and_name_every_attempt(plan_path, tmp_path):
    message, _ = _fail(plan_path, tmp_path, "1:1:abort", relaunches=1)
    assert message.count("killed by signal 6") == 2 and "(after attempt 1 failed: " in message


def test_a_rank_that_hangs_cannot_hang_the_run(plan_path, tmp_path):
    message, elapsed = _fail(plan_path, tmp_path, "1:1:hang", timeout_s=8.0)
    assert "rank 0 failed in task 't' at step 1" in message and "Timed out" in message
    assert "rank 1 was stopped by torchrun" in message
    assert elapsed < 8.0 + STARTUP_S


def test_a_rank_stopped_by_sigstop_is_named_as_stopped_not_as_killed(plan_path, tmp_path):
    message, elapsed = _fail(plan_path, tmp_path, "1:1:stop", timeout_s=8.0)
    assert message.startswith("run on 2 ranks failed: rank 1 was stopped (SIGSTOP")
    assert "signal 9" not in message and "rank 1 died" not in message
    assert elapsed < 8.0 + STARTUP_S


def test_relaunching_a_multi_node_run_is_refused_before_anything_starts(tmp_path):
    from stratagem.errors import ConfigError
    with pytest.raises(ConfigError, match="single-node"):
        launch([], LaunchOptions(4, torchrun_args=("--nnodes=2",), relaunches=1), tmp_path)
    assert not (tmp_path / "job.json").exists()
