"""Ctrl-C and SIGTERM on `stratagem run`: torchrun and every rank end, nothing is left behind, and
the command says how the run ended. Processes are found by a marker this test puts in their
environment (they inherit it), not by name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from stratagem.runtime.processes import MARKER_ENV, marked

from .plans import saved

ROOT = Path(__file__).resolve().parents[2]
START_S, GONE_S = 90.0, 10.0


def _with_marker(marker: str) -> list[int]:
    needle = f"TEST_RUN_MARKER={marker}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def _ranks_running(marker: str) -> bool:
    return sum(b"RANK=" in Path(f"/proc/{pid}/environ").read_bytes() for pid in _with_marker(marker)) >= 2


@pytest.fixture(scope="module")
def plan_path(tmp_path_factory):
    return saved(tmp_path_factory.mktemp("signals"), "mlp-tiny", "data-parallel", 2)


@pytest.mark.parametrize("signum, code, name", [(signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM")])
def test_a_signal_to_the_run_leaves_no_process_behind(plan_path, tmp_path, signum, code, name):
    marker = uuid.uuid4().hex
    env = {**os.environ, "TEST_RUN_MARKER": marker, "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen([sys.executable, "-m", "stratagem", "run", str(plan_path), "--steps", "100000",
                            "--timeout", "120"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + START_S
        while not _ranks_running(marker) and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.2)
        assert _ranks_running(marker), run.communicate(timeout=5)
        os.killpg(run.pid, signum)              # as a terminal's Ctrl-C: the foreground group
        out, err = run.communicate(timeout=GONE_S + 20)
        left_by = time.monotonic() + GONE_S
        while _with_marker(marker) and time.monotonic() < left_by:
            time.sleep(0.2)
        assert not _with_marker(marker), f"left behind: {_with_marker(marker)}"
        assert run.returncode == code, err
        assert f"run interrupted by {name}" in err and "Traceback" not in err, err
    finally:
        for pid in _with_marker(marker):
            os.kill(pid, signal.SIGKILL)


def test_marked_finds_a_child_by_its_environment_and_names_its_state():
    marker = uuid.uuid4().hex
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             env={**os.environ, MARKER_ENV: marker, "RANK": "3"})
    try:
        deadline = time.monotonic() + 10
        while not marked(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        (found,) = marked(marker)
        assert (found.pid, found.rank) == (child.pid, 3) and found.state in "RS"
        os.kill(child.pid, signal.SIGSTOP)
        time.sleep(0.2)
        assert marked(marker)[0].state == "T"
    finally:
        child.kill()
        child.wait()
    assert not [p for p in marked(marker) if p.state != "Z"]
