"""A distributed run against the single-process reference: the same training, within a tolerance
derived from the dtype and the computation, never from one machine's observed error.

Both sides train the same module, weights, batches and optimizer in the same dtype (float64 for the
check: `stratagem run --check`). They differ only in the order of floating-point operations (a
split reduction sums its parts in another order, a gradient is all-reduced), so with u the unit
roundoff and S = steps(graph) the rounding steps of one forward (stratagem.tdl.rounding; a
pipeline plan's m micro-batches: runtime.stages.rounding_steps_of):

    eps_step  = 2 u 3S           relative error of a loss or a gradient element, forward and
                                 backward (backward does about twice forward's operations)
    grad_atol = eps_step G       first-step gradients, G the largest reference gradient element
                                 (the terms every gradient sums are taken to be no larger)
    per step, an update differs by at most lr * sens * grad_atol, sens = d update / d g:
        SGD 1, momentum 0.9: 1 / (1 - 0.9), Adam/AdamW: 1 / eps_adam (|d (g / (|g| + eps)) / dg| <= 1 / eps,
        which is what keeps a rounding-level gradient, a true zero, from becoming a +-lr step)
    param_atol(k) = k lr sens grad_atol c                      after k steps (first order); c = 2 with
                                 gradient clipping (the clip scale min(1, m / |g|) carries the norm's
                                 relative error, at most eps_step, adding at most |g_i| eps_step <=
                                 grad_atol to each element), else 1
    loss_rtol(k)  = eps_step + L1 param_atol(k) / |loss_k|     L1: the largest sum of |g|

The gradients are compared before any optimizer sees them, so a gradient off by a factor (which
Adam's normalization would hide from the parameters) is caught too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from stratagem.ir import Graph
from stratagem.runtime.training import Reference
from stratagem.tdl.rounding import rounding_steps, unit_roundoff

ADAM_EPS = 1e-8                 # torch.optim.Adam's and AdamW's default eps (training.make_optimizer)
SENSITIVITY = {"sgd": 1.0, "momentum": 1 / (1 - 0.9), "adam": 1 / ADAM_EPS, "adamw": 1 / ADAM_EPS}
BACKWARD_FACTOR = 3             # forward + backward operations over forward's


@dataclass(frozen=True)
class Tolerance:
    step_rtol: float            # eps_step
    grad_atol: float
    param_atol_per_step: float

    def loss_rtol(self, step: int, loss: float, gradient_l1: float) -> float:
        return self.step_rtol + gradient_l1 * self.param_atol_per_step * step / max(abs(loss), 1e-300)


def tolerance(graph: Graph, dtype: str, optimizer: str, lr: float, max_gradient: float,
              clipped: bool = False, steps: float | None = None) -> Tolerance:
    """`steps`: S when the run computes more than `graph` once (a pipeline plan's micro-batches:
    runtime.stages.rounding_steps_of); else steps(graph)."""
    step_rtol = 2 * unit_roundoff(dtype) * BACKWARD_FACTOR * (rounding_steps(graph) if steps is None else steps)
    grad_atol = step_rtol * max_gradient
    return Tolerance(step_rtol, grad_atol, lr * SENSITIVITY[optimizer] * grad_atol * (2 if clipped else 1))


def reference_tolerance(graph: Graph, reference: Reference, steps: float | None = None) -> Tolerance:
    spec = reference.spec
    return tolerance(graph, spec.dtype, spec.optimizer, spec.lr, reference.max_gradient,
                     spec.max_grad_norm is not None, steps)


@dataclass(frozen=True)
class Comparison:
    max_loss_excess: float            # max over steps of |loss - reference| / its tolerance
    max_rel_loss_diff: float
    max_grad_diff: float | None       # max |g - reference|, first step
    worst_gradient: str | None
    max_param_diff: float | None      # max |p - reference|, after the last step
    worst_parameter: str | None
    max_buffer_excess: float | None   # max over state buffers of |b - reference| / its bound
    worst_buffer: str | None
    tolerance: Tolerance
    steps: int
    dtype: str

    @property
    def same_training(self) -> bool:
        return (self.max_loss_excess <= 1
                and (self.max_grad_diff is None or self.max_grad_diff <= self.tolerance.grad_atol)
                and (self.max_param_diff is None
                     or self.max_param_diff <= self.tolerance.param_atol_per_step * self.steps)
                and (self.max_buffer_excess is None or self.max_buffer_excess <= 1))

    def to_dict(self) -> dict:
        t = self.tolerance
        return {"dtype": self.dtype, "max_rel_loss_diff": self.max_rel_loss_diff,
                "loss_diff_over_tolerance": self.max_loss_excess,
                "max_grad_diff": self.max_grad_diff, "grad_tolerance": t.grad_atol,
                "worst_gradient": self.worst_gradient, "max_param_diff": self.max_param_diff,
                "param_tolerance": t.param_atol_per_step * self.steps, "worst_parameter": self.worst_parameter,
                "buffer_diff_over_tolerance": self.max_buffer_excess, "worst_buffer": self.worst_buffer,
                "same_training": self.same_training}


def compare(graph: Graph, losses: Sequence[float], reference: Reference,
            gradients: Mapping[str, torch.Tensor] | None = None,
            params: Mapping[str, torch.Tensor] | None = None,
            buffers: Mapping[str, torch.Tensor] | None = None, steps: float | None = None) -> Comparison:
    tol = reference_tolerance(graph, reference, steps)
    pairs = list(zip(losses, reference.losses, strict=True))
    excess = max(abs(a - b) / (tol.loss_rtol(k, b, reference.gradient_l1) * max(abs(b), 1e-300))
                 for k, (a, b) in enumerate(pairs))
    rel = max(abs(a - b) / max(abs(b), 1e-300) for a, b in pairs)
    grad, grad_name = _largest_difference(gradients, reference.gradients)
    param, param_name = _largest_difference(params, reference.parameters)
    buffer, buffer_name = _buffer_excess(graph, buffers, reference, tol, len(pairs))
    return Comparison(excess, rel, grad, grad_name, param, param_name, buffer, buffer_name, tol, len(pairs),
                      reference.spec.dtype)


def _buffer_excess(graph: Graph, buffers: Mapping[str, torch.Tensor] | None, reference: Reference,
                   tol: Tolerance, steps: int) -> tuple[float | None, str | None]:
    """The buffers the forward writes (graph.meta["state_updates"]), against the reference's: each
    step's value carries the forward's rounding at the buffer's scale, and the steps add up;
    integer buffers (counters) must be equal."""
    state = sorted((graph.meta.get("state_updates") or {}))
    if buffers is None or not state:
        return None, None
    worst, name = 0.0, None
    for b in state:
        want, got = reference.buffers[b], buffers.get(b)
        if got is None:
            return float("inf"), b
        bound = steps * tol.step_rtol * want.abs().max().item() if want.is_floating_point() else 0.0
        diff = (got.to(want.dtype) - want).abs().max().item() if want.numel() else 0.0
        excess = diff / bound if bound > 0 else (0.0 if diff == 0 else float("inf"))
        if excess >= worst:
            worst, name = excess, b
    return worst, name


def _largest_difference(got: Mapping[str, torch.Tensor] | None, want: Mapping[str, torch.Tensor]
                        ) -> tuple[float | None, str | None]:
    if got is None:
        return None, None
    missing = sorted(set(want) - set(got))
    if missing:
        return float("inf"), missing[0]
    diffs = {n: (got[n].to(w.dtype) - w).abs().max().item() if w.numel() else 0.0 for n, w in want.items()}
    worst = max(diffs, key=diffs.get, default=None)
    return (diffs[worst] if worst is not None else 0.0), worst
