"""Per-op timing: an op's backward is the time between its outputs' and its inputs' stamps."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

from stratagem.runtime.op_timing import OpTimer  # noqa: E402


class SlowBackward(torch.autograd.Function):
    """Identity whose backward sleeps `seconds`."""

    @staticmethod
    def forward(ctx, x, seconds):
        ctx.seconds = seconds
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        time.sleep(ctx.seconds)
        return grad, None


def test_backward_of_each_op_lies_between_its_stamps():
    timer = OpTimer()
    x = torch.ones(4, requires_grad=True)
    timer.begin_step()
    a = timer.stamp(SlowBackward.apply(timer.stamp(x, "a", "in"), 0.05), "a", "out")
    b = timer.stamp(SlowBackward.apply(timer.stamp(a, "b", "in"), 0.02), "b", "out")
    b.sum().backward()
    timer.end_step()
    report = timer.report()
    assert report["steps"] == 1 and report["step_s"] >= 0.07
    backward_a, backward_b = report["ops"]["a"]["backward"], report["ops"]["b"]["backward"]
    assert 0.05 <= backward_a < 0.07 and 0.02 <= backward_b < 0.05      # each op's own sleep, not the other's
    assert torch.equal(x.grad, torch.ones(4))                          # stamps pass the gradient through


def test_times_are_means_over_steps_and_a_stamp_on_a_constant_is_no_op():
    timer = OpTimer()
    constant = torch.ones(3)
    assert timer.stamp(constant, "c", "in") is constant
    for seconds in (0.01, 0.03):
        timer.begin_step()
        timer.add("c", "forward", seconds)
        timer.end_step()
    assert timer.report()["ops"]["c"]["forward"] == pytest.approx(0.02)
    assert timer.report()["ops"]["c"]["backward"] == 0.0
