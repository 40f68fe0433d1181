"""The bad-input suite: every case ends in a clear error or a result checked to be correct, and
none may hang: each test runs under a deadline (SIGALRM), so a hang fails the test instead of
stalling CI. Inputs are small: mlp-tiny on cpu-1x2."""

from __future__ import annotations

import json
import signal
import threading

import pytest
import yaml

DEADLINE_S = 60


class Hung(Exception):
    """A case ran past its deadline."""


@pytest.fixture(autouse=True)
def deadline():
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise Hung(f"the case ran past its {DEADLINE_S} s deadline: a hang")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(DEADLINE_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="session")
def graph():
    from stratagem import zoo
    return zoo.build("mlp-tiny")


@pytest.fixture(scope="session")
def dp_plan(graph):
    """Data parallel for mlp-tiny on the two devices of cpu-1x2 (a runnable plan)."""
    from stratagem.search.planner import search
    return search(graph, "cpu-1x2", algorithm="data-parallel")


@pytest.fixture(scope="session")
def plan_path(dp_plan, tmp_path_factory):
    path = tmp_path_factory.mktemp("plans") / "plan.json"
    dp_plan.save(path)
    return path


@pytest.fixture
def plan_record(plan_path):
    """The plan file's JSON record, fresh for each test to spoil."""
    return json.loads(plan_path.read_text())


@pytest.fixture
def cluster_record():
    """The cpu-1xN preset at N = 2, as a cluster file's record, fresh for each test to spoil."""
    from stratagem.cluster.loader import PRESET_DIR
    record = yaml.safe_load((PRESET_DIR / "cpu-1xN.yaml").read_text())
    record.update(name="two-cpus", devices_per_node=2)
    return record
