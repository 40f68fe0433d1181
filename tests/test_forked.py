"""stratagem.forked: the items shared with forked children give what a serial map gives, in order,
each reported once here; a child's failure (an error, an unpicklable result, its death) is made
good here with a warning; an error here (a Ctrl-C) kills and reaps every child; no nested forks."""

from __future__ import annotations

import os
import time
import warnings

import pytest

from stratagem import forked


def square_and_pid(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def no_child_left() -> bool:
    """True when this process has no child, running or unreaped."""
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


@pytest.mark.parametrize("workers", [2, 3])
def test_items_run_in_forked_workers_and_come_back_in_order(workers):
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = forked.shared_map(square_and_pid, list(range(11)), lambda i, r: seen.append((i, r[0])), workers)
    assert [r[0] for r in out] == [x * x for x in range(11)]
    assert sorted(seen) == [(i, i * i) for i in range(11)]
    pids = {r[1] for r in out}
    assert len(pids) == workers and os.getpid() in pids
    assert all(out[i][1] == out[i % workers][1] for i in range(11))       # item i in worker i mod w
    assert no_child_left()


def test_serial_where_one_worker_one_item_or_inside_a_child(monkeypatch):
    assert {r[1] for r in forked.shared_map(square_and_pid, [1, 2, 3], workers=1)} == {os.getpid()}
    assert forked.shared_map(square_and_pid, [4], workers=4) == [(16, os.getpid())]
    monkeypatch.setenv(forked.CHILD_ENV, "1")
    assert forked.worker_count(10, 4) == 1
    assert {r[1] for r in forked.shared_map(square_and_pid, [1, 2, 3], workers=3)} == {os.getpid()}


def test_a_child_does_not_fork_again():
    def nested(x: int) -> set[int]:
        return {pid for _, pid in forked.shared_map(square_and_pid, [x, x + 1, x + 2], workers=3)}
    out = forked.shared_map(nested, [0, 10], workers=2)
    assert len(out[0]) == 3 and len(out[1]) == 1          # the child ran its three items itself


def test_many_large_results_pass_through_the_pipes():
    big = forked.shared_map(lambda i: bytes([i]) * (3 << 20), list(range(6)), workers=2)
    assert [len(b) for b in big] == [3 << 20] * 6 and [b[-1] for b in big] == list(range(6))


def _failing_in_children(parent: int, how: str):
    def fn(x: int) -> object:
        if os.getpid() != parent and x == 3:
            if how == "raise":
                raise ValueError("only in a child")
            if how == "die":
                os._exit(9)
            return lambda: x                          # "unpicklable": a local function
        return x + 100
    return fn


@pytest.mark.parametrize("how", ["raise", "die", "unpicklable"])
def test_what_a_failed_child_left_is_computed_here_with_a_warning(how):
    fn = _failing_in_children(os.getpid(), how)
    with pytest.warns(RuntimeWarning, match="forked worker failed"):
        out = forked.shared_map(fn, list(range(8)), workers=2)
    assert out == [x + 100 for x in range(8)]
    assert no_child_left()


def test_an_error_of_the_function_raises_as_a_serial_run_raises_it():
    def fn(x: int) -> int:
        if x == 5:
            raise ZeroDivisionError("item 5")
        return x
    with pytest.raises(ZeroDivisionError, match="item 5"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        forked.shared_map(fn, list(range(8)), workers=2)
    assert no_child_left()


def test_a_ctrl_c_here_kills_and_reaps_the_children_and_keeps_what_was_reported():
    parent, reported = os.getpid(), {}

    def stopped_here_at_3(x: int) -> int:
        if x == 3 and os.getpid() == parent:
            raise KeyboardInterrupt
        return x

    with pytest.raises(KeyboardInterrupt):
        forked.shared_map(stopped_here_at_3, list(range(9)), lambda i, r: reported.__setitem__(i, r), workers=3)
    assert 0 in reported and 3 not in reported and all(reported[i] == i for i in reported)
    assert no_child_left()


def _send_three_then(end: str):
    def fn(send):
        for i in range(3):
            send(("item", i, os.getpid()))
        if end == "raise":
            raise ValueError("the background's trouble")
        if end == "unpicklable":
            send(lambda: None)
            send(("never sent",))
    return fn


def _everything(job) -> list:
    return list(job.messages())


def test_a_background_child_sends_in_order_while_this_process_goes_on():
    with forked.background(_send_three_then("return")) as job:
        if job is None:
            pytest.skip("one CPU: no worker")
        received = _everything(job)
        assert [m[:2] for m in received] == [("item", 0), ("item", 1), ("item", 2)]
        assert received[0][2] != os.getpid() and job.failure == ""
    assert no_child_left()


def test_a_background_child_goes_on_while_its_large_message_waits_to_be_read(tmp_path):
    """The child's next step runs before this process reads the message (8 MiB, far more than
    a pipe holds: a write to the pipe itself would wait until it is read)."""
    marker = tmp_path / "went-on"

    def large_then_marker(send):
        send(b"x" * (8 << 20))
        marker.write_text("yes")
        send("after")
    with forked.background(large_then_marker) as job:
        if job is None:
            pytest.skip("one CPU: no worker")
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marker.exists(), "the child waited for this process to read its message"
        assert _everything(job) == [b"x" * (8 << 20), "after"] and job.failure == ""
    assert no_child_left()


@pytest.mark.parametrize("end, said", [("raise", "ValueError: the background's trouble"),
                                       ("unpicklable", "local object")])
def test_a_background_child_that_fails_says_why_after_what_it_sent(end, said):
    with forked.background(_send_three_then(end)) as job:
        if job is None:
            pytest.skip("one CPU: no worker")
        received = _everything(job)
        assert [m[1] for m in received] == [0, 1, 2] and said in job.failure
    assert no_child_left()


def test_a_background_child_still_running_is_killed_and_reaped_on_the_way_out():
    def forever(send):
        send("started")
        while True:
            pass
    with forked.background(forever) as job:
        if job is None:
            pytest.skip("one CPU: no worker")
        assert job.take(wait=True) == ["started"] and not job.ended
    assert no_child_left()


def test_no_background_child_inside_a_child(monkeypatch):
    monkeypatch.setenv(forked.CHILD_ENV, "1")
    with forked.background(_send_three_then("return")) as job:
        assert job is None


TORCH_AFTER_FORK = """
import torch
from stratagem import forked
(torch.ones(4_000_000) * 2).sum()                    # this process's OpenMP pool starts
def child(send):
    send(float((torch.zeros(4_000_000) + 1).sum()))  # a parallel kernel in the child
with forked.background(child) as job:
    got = []
    while not job.ended:
        got += job.take(wait=True)
print(got, job.failure)
"""


def test_a_child_runs_torch_kernels_after_its_parent_used_an_intra_op_pool():
    import subprocess
    import sys
    if forked.worker_count(2) < 2:
        pytest.skip("one CPU: no worker")
    done = subprocess.run([sys.executable, "-c", TORCH_AFTER_FORK], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[4000000.0]"            # without one torch thread in the child: a hang


def test_stratagem_workers_caps_the_processes_and_a_bad_value_is_refused(monkeypatch):
    from stratagem.errors import ConfigError
    monkeypatch.setenv(forked.WORKERS_ENV, "1")
    assert forked.worker_count(10) == 1
    assert {r[1] for r in forked.shared_map(square_and_pid, [1, 2, 3])} == {os.getpid()}
    monkeypatch.setenv(forked.WORKERS_ENV, "2")
    assert forked.worker_count(10) == min(2, forked.usable_cpus())
    monkeypatch.setenv(forked.WORKERS_ENV, "many")
    with pytest.raises(ConfigError, match="STRATAGEM_WORKERS"):
        forked.worker_count(10)
