"""Work beside FT (search.beside): what a worker computes while FT searches is what this process
would compute, and a worker's failure is made good here, said once."""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import replace

import pytest

from stratagem import forked, zoo
from stratagem.search import modes
from stratagem.search.beside import beside
from stratagem.search.context import context
from tests.search.recorder import Recorder


def _needs_a_worker() -> None:
    if forked.worker_count(2) < 2:
        pytest.skip("one CPU: no worker")


def _counting(name: str, count: int):
    """A task: a phase of `count` units, then [name, the pid that ran it]."""
    def task(ctx):
        ctx.progress.phase(name, count)
        for _ in range(count):
            ctx.progress.advance()
        ctx.progress.done()
        return [name, os.getpid()]
    return task


@pytest.mark.parametrize("order", ["abc", "bac", "cba"])
def test_results_asked_in_any_order_are_the_workers_and_every_phase_is_replayed_once(order):
    """a and b run in the worker (both quick: their messages arrive together), c here."""
    _needs_a_worker()
    ctx = replace(context(zoo.build("mlp-tiny"), "cpu-1x2", 2), progress=Recorder())
    tasks = {"a": _counting("a", 2), "b": _counting("b", 3), "c": _counting("c", 1)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # a result lost would be made good, warned
        with beside(ctx, tasks, ("a", "b")) as side:
            time.sleep(1.0)                            # both sent: nothing is computed here
            got = {name: side.result(name) for name in order}
    a, b, c = got["a"], got["b"], got["c"]
    assert b[0] == "b" and a[0] == "a" and c[0] == "c"
    assert a[1] == b[1] != os.getpid() and c[1] == os.getpid()        # c was not the worker's
    replayed = [(p.name, p.total, p.units) for p in ctx.progress.phases()]
    assert sorted(replayed) == [("a", 2, 2), ("b", 3, 3), ("c", 1, 1)]
    assert replayed.index(("a", 2, 2)) < replayed.index(("b", 3, 3))


def test_while_waiting_for_a_slow_result_a_task_queued_after_it_is_computed_here_once():
    """The worker runs a (slow) then b: asked for a, this process computes b meanwhile; the
    worker's copy of b, if it gets there, is dropped, its progress not replayed twice."""
    _needs_a_worker()
    ctx = replace(context(zoo.build("mlp-tiny"), "cpu-1x2", 2), progress=Recorder())
    counting_a = _counting("a", 2)

    def slow_a(ctx):
        time.sleep(1.0)
        return counting_a(ctx)
    with beside(ctx, {"a": slow_a, "b": _counting("b", 3)}, ("a", "b")) as side:
        a = side.result("a")
        time.sleep(0.5)                               # the worker has sent its own b by now
        b = side.result("b")
    assert a == ["a", side.job.child.pid] and b == ["b", os.getpid()]
    assert sorted((p.name, p.total, p.units) for p in ctx.progress.phases()) == [("a", 2, 2), ("b", 3, 3)]


def test_yielding_tasks_run_at_the_least_priority_from_the_first_of_them_on():
    """The worker runs a at this process's priority, then b and c (b yielding) at nice 19; this
    process keeps its own."""
    _needs_a_worker()
    ctx = context(zoo.build("mlp-tiny"), "cpu-1x2", 2)
    niceness = os.nice(0)

    def priority(ctx):
        return [os.nice(0), os.getpid()]
    with beside(ctx, {"a": priority, "b": priority, "c": priority}, ("a", "b", "c"), yielding=("b",)) as side:
        time.sleep(0.5)
        got = [side.result(name) for name in "abc"]
    assert all(pid == side.job.child.pid for _, pid in got)
    assert [nice for nice, _ in got] == [niceness, max(niceness, 19), max(niceness, 19)]
    assert os.nice(0) == niceness


def test_without_a_worker_each_result_is_computed_here(monkeypatch):
    monkeypatch.setenv(forked.WORKERS_ENV, "1")
    ctx = context(zoo.build("mlp-tiny"), "cpu-1x2", 2)
    with beside(ctx, {"a": _counting("a", 1)}, ("a",)) as side:
        assert side.job is None and side.result("a") == ["a", os.getpid()]


def test_a_failed_worker_is_made_good_here_and_said_once(monkeypatch):
    _needs_a_worker()
    parent = os.getpid()

    def failing_in_the_worker(ctx):
        if os.getpid() != parent:
            raise RuntimeError("the worker's own trouble")
        return ["here"]
    ctx = context(zoo.build("mlp-tiny"), "cpu-1x2", 2)
    with pytest.warns(RuntimeWarning, match="the worker's own trouble") as said:
        with beside(ctx, {"a": failing_in_the_worker, "b": _counting("b", 1)}, ("a", "b")) as side:
            assert side.result("a") == ["here"] and side.result("b") == ["b", parent]
    assert len([w for w in said if "worker beside FT" in str(w.message)]) == 1


def _summary(plan) -> tuple:
    return (plan.algorithm, plan.iteration_time_s, plan.peak_memory_bytes, dict(plan.strategy), plan.recompute,
            plan.details.get("chosen_because"))


def test_least_time_ft_with_the_practitioners_priced_in_a_worker_chooses_as_one_process(monkeypatch):
    """gpt-tiny-tiny on 8 A100s: the practitioners' plans priced in the worker are those priced
    here, with this graph; least_time_ft chooses the same plan with a worker and without."""
    _needs_a_worker()
    graph = zoo.build("gpt-tiny-tiny")
    ctx = context(graph, "a100-1x8", 8)
    assert modes._worker_tasks(ctx, "no") == ("practitioners",)
    with beside(ctx, modes._tasks("no"), ("practitioners",)) as side:
        priced = side.result("practitioners")
    assert all(p is not None and p.graph is graph for p in priced)
    assert [p.iteration_time_s for p in priced] == [p.iteration_time_s for p in modes._practitioners_plans(ctx)]
    shared = modes.least_time_ft(ctx, {"pipeline": "no"})
    monkeypatch.setenv(forked.WORKERS_ENV, "1")
    serial = modes.least_time_ft(ctx, {"pipeline": "no"})
    assert _summary(shared) == _summary(serial)
