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


def _fail(plan_path, tmp_path, fault: str, timeout_s: float = TIMEOUT_S) -> tuple[str, float]:
    task = {"name": "t", "plan": str(plan_path), "steps": 4}
    begin = time.monotonic()
    with pytest.raises(RunFailed) as error:
        launch([task], LaunchOptions(2, timeout_s=timeout_s, env={FAULT_ENV: fault}), tmp_path)
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


def test_a_rank_that_hangs_cannot_hang_the_run(plan_path, tmp_path):
    message, elapsed = _fail(plan_path, tmp_path, "1:1:hang", timeout_s=8.0)
    assert "rank 0 failed in task 't' at step 1" in message and "Timed out" in message
    assert "rank 1 was stopped by torchrun" in message
    assert elapsed < 8.0 + STARTUP_S
