"""Per-op wall times on one rank: where a step's time goes, op by op (what `stratagem validate
--per-op` sets beside the cost model's prediction).

Off by default: a `PlanModule` whose `timer` is None runs no timer and no stamp. On:

    forward   each op's inputs moved to the layouts it reads (re-scheduling: DTensor redistribute,
              waited for), then its local kernel, each timed around the call
    backward  an identity autograd function stamps the time when the gradient reaches each of an
              op's local outputs and when its inputs' gradients leave; the op's backward is the
              last input stamp less the first output stamp (ops run one after another in backward,
              as autograd runs this graph's chain; branches that interleave are counted in both)
    sync      each parameter's gradient synchronization (the post-accumulate-grad hook), to its
              owner op
    step      the whole step; what no op accounts for (gradient moves in backward, the autograd
              engine, the optimizer) is the step less the ops' sums

On a GPU every stamp synchronizes the device first, so the times are the kernels', not their
launches'. Times are per step, averaged over the steps timed.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import torch

PHASES = ("move", "forward", "backward", "sync")


class OpTimer:
    def __init__(self, device: torch.device | None = None):
        self.cuda = device is not None and device.type == "cuda"
        self.totals: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(PHASES, 0.0))
        self.step_total_s = 0.0
        self.steps = 0
        self._stamps: list[tuple[float, str, str]] = []
        self._step_begin = 0.0

    def now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def add(self, op: str, phase: str, seconds: float) -> None:
        self.totals[op][phase] += seconds

    def stamp(self, tensor: torch.Tensor, op: str, side: str) -> torch.Tensor:
        """`tensor`, passed through; its gradient's arrival is stamped (side "out": at an op's output,
        the op's backward begins; "in": at its input, it has ended)."""
        if not (isinstance(tensor, torch.Tensor) and tensor.requires_grad):
            return tensor
        return _Stamp.apply(tensor, self, op, side)

    def begin_step(self) -> None:
        self._stamps.clear()
        self._step_begin = self.now()

    def end_step(self) -> None:
        self.step_total_s += self.now() - self._step_begin
        self.steps += 1
        first_out: dict[str, float] = {}
        last_in: dict[str, float] = {}
        for when, op, side in self._stamps:
            if side == "out":
                first_out[op] = min(first_out.get(op, when), when)
            else:
                last_in[op] = max(last_in.get(op, when), when)
        for op, begin in first_out.items():
            if op in last_in and last_in[op] >= begin:
                self.add(op, "backward", last_in[op] - begin)
        self._stamps.clear()

    def report(self) -> dict[str, Any]:
        """Mean seconds per step: per op and phase, and the whole step."""
        steps = max(self.steps, 1)
        return {"steps": self.steps, "step_s": self.step_total_s / steps,
                "ops": {op: {phase: seconds / steps for phase, seconds in phases.items()}
                        for op, phases in self.totals.items()}}


class _Stamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, timer, op, side):
        ctx.timer, ctx.op, ctx.side = timer, op, side
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad):
        ctx.timer._stamps.append((ctx.timer.now(), ctx.op, ctx.side))
        return grad, None, None, None


def settled(tensor: Any) -> Any:
    """A moved DTensor whose collective has finished (functional collectives complete lazily, when
    the result is first used: without this, a move's time would be counted in the next kernel)."""
    local = getattr(tensor, "_local_tensor", None)
    wait = getattr(local, "wait", None)
    if callable(wait):
        wait()
    return tensor
