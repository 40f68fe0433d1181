"""The training both sides of a check run: the same module, weights, data and optimizer.

A plan made from a zoo model names it (`Plan.model`); its batch size is the graph's (a pipeline
plan's graph is one micro-batch's: it trains on m times that, runtime.stages). Weights come
from `zoo.module(name, "cpu", seed=seed)`; step s trains on `variant.inputs(batch, cpu,
Generator(seed + 1 + s))`, so every rank and the single-process reference see the same batches.
The optimizer is the plan's (`Plan.optimizer`), built by `make_optimizer` with a fixed learning rate;
Adam and AdamW run torch's fused kernel (on CPU 4x faster than the per-tensor loop; DTensors take it).
`dtype` "float64" trains the same model, weights and batches in float64 (the same-training check:
runtime.compare), "float32" as captured.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from stratagem.frontend.precision import cast_floating
from stratagem.ir import Graph
from stratagem.plan import Plan
from stratagem.runtime.errors import ExecutionError
from stratagem.runtime.session import DTYPES

OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")


@dataclass(frozen=True)
class TrainingSpec:
    model: str                # zoo name
    batch_size: int
    optimizer: str = "adam"
    lr: float = 1e-3
    seed: int = 0
    dtype: str = "float32"
    max_grad_norm: float | None = None     # clip gradients to this global L2 norm before each step

    @property
    def floating(self) -> torch.dtype | None:
        """The dtype floating-point tensors are trained in, when it is not the captured one."""
        return None if self.dtype == "float32" else getattr(torch, self.dtype)


def training_spec(plan: Plan, lr: float = 1e-3, seed: int = 0, dtype: str = "float32",
                  max_grad_norm: float | None = None) -> TrainingSpec:
    from stratagem.frontend import zoo
    name = plan.model or plan.graph.name
    try:
        zoo.resolve(name)
    except zoo.UnknownModelError:
        raise ExecutionError(f"plan's model {name!r} is not in the zoo",
                             hint="`stratagem run` rebuilds zoo models only; for your own module use "
                                  "stratagem.parallelize(module, plan) in a torchrun script") from None
    if dtype not in DTYPES:
        raise ExecutionError("unknown training dtype", expected=" | ".join(DTYPES), got=repr(dtype))
    from stratagem.runtime.stages import global_batch_factor
    batch_size = graph_batch_size(plan.graph, name) * global_batch_factor(plan)
    return TrainingSpec(name, batch_size, plan.optimizer, lr, seed, dtype, max_grad_norm)


def graph_batch_size(graph: Graph, name: str) -> int:
    from stratagem.frontend import zoo
    for t in graph.inputs:
        spec = graph.tensors[t]
        if spec.sample_dim is not None:
            return spec.shape[spec.sample_dim]
    return zoo.variant(name).batch_size


def build_module(spec: TrainingSpec) -> torch.nn.Module:
    from stratagem.frontend import zoo
    module, _ = zoo.module(spec.model, "cpu", batch_size=spec.batch_size, seed=spec.seed)
    return module if spec.floating is None else module.to(spec.floating)


def batch(spec: TrainingSpec, step: int) -> tuple[Any, ...]:
    from stratagem.frontend import zoo
    generator = torch.Generator().manual_seed(spec.seed + 1 + step)
    return cast_floating(zoo.variant(spec.model).inputs(spec.batch_size, torch.device("cpu"), generator),
                         spec.floating)


def make_optimizer(name: str, params: Iterable[torch.nn.Parameter], lr: float,
                   max_grad_norm: float | None = None, across: Callable[[float], float] | None = None
                   ) -> torch.optim.Optimizer:
    """The plan's optimizer; with `max_grad_norm`, gradients are clipped to that global norm
    before each step (a step pre-hook: `clip_grad_norm`; `across`: as there)."""
    params = list(params)
    optimizer = _optimizer(name, params, lr)
    if max_grad_norm is not None:
        optimizer.register_step_pre_hook(lambda *_: _clipped(params, max_grad_norm, across))
    return optimizer


def _clipped(params: list, max_grad_norm: float, across: Callable[[float], float] | None) -> None:
    """A step pre-hook returns None (or new arguments)."""
    clip_grad_norm(params, max_grad_norm, across=across)


def _optimizer(name: str, params: list, lr: float) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if name == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, fused=True)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, fused=True)
    raise ExecutionError("unknown optimizer", expected=" | ".join(OPTIMIZERS), got=repr(name))


def clip_grad_norm(params: Iterable[torch.nn.Parameter], max_norm: float, eps: float = 1e-6,
                   across: Callable[[float], float] | None = None) -> float:
    """torch.nn.utils.clip_grad_norm_ over parameters that may be DTensors on different meshes
    (sharded, replicated, on sub-meshes): the L2 norm of every gradient together, each gradient's
    norm taken whole (DTensor reduces over its shards), then every gradient scaled by
    min(1, max_norm / (norm + eps)). `across`: sums the squares with the other ranks' parameters
    (a pipeline stage's: runtime.pipeline.StageModule.sum_over_stages). Returns the norm before
    clipping."""
    grads = [p.grad for p in params if p.grad is not None]
    squares = 0.0
    for grad in grads:
        norm = torch.linalg.vector_norm(grad.detach(), dtype=torch.float64)
        squares += float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm) ** 2
    total = (squares if across is None else across(squares)) ** 0.5
    scale = max_norm / (total + eps)
    if scale < 1:
        for grad in grads:
            grad.detach().mul_(scale)
    return total


def train_step(model, optimizer, inputs, on_gradients=None) -> float:
    """One step; `on_gradients(named parameters)` sees the gradients before the optimizer does. A
    pipeline stage (runtime.pipeline) runs its schedule's forwards and backwards in one call."""
    if hasattr(model, "forward_backward"):
        loss = model.forward_backward(*inputs)
    else:
        loss = model(*inputs)
        loss.backward()
    if on_gradients is not None:
        on_gradients(dict(model.named_parameters()))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.detach())


def whole(tensor: torch.Tensor) -> torch.Tensor:
    """A local copy of a tensor, whole (a DTensor gathered)."""
    full = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
    return full.detach().cpu().clone()


@dataclass(frozen=True)
class Reference:
    """The plain module's training: losses, first-step gradients, final parameters, and the
    gradient magnitudes the comparison's tolerance is derived from (runtime.compare)."""
    spec: TrainingSpec
    losses: list[float]
    gradients: dict[str, torch.Tensor]       # of the first step
    parameters: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]         # after the last step (running statistics, counters)
    max_gradient: float                      # largest |g| element over all steps
    gradient_l1: float                       # largest sum of |g| over all parameters, over steps


def reference_run(spec: TrainingSpec, steps: int) -> Reference:
    """The plain module trained for `steps` in this process."""
    module = build_module(spec)
    optimizer = make_optimizer(spec.optimizer, module.parameters(), spec.lr, spec.max_grad_norm)
    first: dict[str, torch.Tensor] = {}
    magnitudes: list[tuple[float, float]] = []

    def seen(named: dict[str, torch.nn.Parameter]) -> None:
        grads = {n: p.grad for n, p in named.items() if p.grad is not None}
        if not first:
            first.update({n: whole(g) for n, g in grads.items()})
        magnitudes.append((max((g.abs().max().item() for g in grads.values()), default=0.0),
                           sum(g.abs().sum().item() for g in grads.values())))

    losses = [train_step(module, optimizer, batch(spec, s), seen) for s in range(steps)]
    parameters = {n: whole(p) for n, p in module.named_parameters()}
    buffers = {n: whole(b) for n, b in module.named_buffers()}
    return Reference(spec, losses, first, parameters, buffers, max((m for m, _ in magnitudes), default=0.0),
                     max((l1 for _, l1 in magnitudes), default=0.0))
