"""The training both sides of a check run: the same module, weights, data and optimizer.

A plan made from a zoo model names it (`Plan.model`); its batch size is the graph's. Weights come
from `zoo.module(name, "cpu", seed=seed)`; step s trains on `variant.inputs(batch, cpu,
Generator(seed + 1 + s))`, so every rank and the single-process reference see the same batches.
The optimizer is the plan's (`Plan.optimizer`), built by `make_optimizer` with a fixed learning rate;
Adam and AdamW run torch's fused kernel (on CPU 4x faster than the per-tensor loop; DTensors take it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from stratagem.ir import Graph
from stratagem.plan import Plan
from stratagem.runtime.errors import ExecutionError

OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")


@dataclass(frozen=True)
class TrainingSpec:
    model: str                # zoo name
    batch_size: int
    optimizer: str = "adam"
    lr: float = 1e-3
    seed: int = 0


def training_spec(plan: Plan, lr: float = 1e-3, seed: int = 0) -> TrainingSpec:
    from stratagem.frontend import zoo
    name = plan.model or plan.graph.name
    try:
        zoo.resolve(name)
    except zoo.UnknownModelError:
        raise ExecutionError(f"plan's model {name!r} is not in the zoo",
                             hint="`stratagem run` rebuilds zoo models only; for your own module use "
                                  "stratagem.parallelize(module, plan) in a torchrun script") from None
    return TrainingSpec(name, graph_batch_size(plan.graph, name), plan.optimizer, lr, seed)


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
    return module


def batch(spec: TrainingSpec, step: int) -> tuple[Any, ...]:
    from stratagem.frontend import zoo
    generator = torch.Generator().manual_seed(spec.seed + 1 + step)
    return zoo.variant(spec.model).inputs(spec.batch_size, torch.device("cpu"), generator)


def make_optimizer(name: str, params: Iterable[torch.nn.Parameter], lr: float) -> torch.optim.Optimizer:
    params = list(params)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if name == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, fused=True)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, fused=True)
    raise ExecutionError("unknown optimizer", expected=" | ".join(OPTIMIZERS), got=repr(name))


def train_step(model, optimizer, inputs) -> float:
    loss = model(*inputs)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.detach())


@dataclass(frozen=True)
class Reference:
    losses: list[float]
    parameters: dict[str, torch.Tensor]
    noise: dict[str, torch.Tensor]      # elements whose gradient was at rounding level at some step


NOISE_FLOOR = 1e-5     # |g| below this fraction of the step's largest gradient element


def reference_run(spec: TrainingSpec, steps: int) -> Reference:
    """The plain module trained for `steps` in this process: losses, final parameters, and which
    elements ever had a gradient at rounding level (a true zero, e.g. an attention key bias, whose
    sign is noise: Adam turns it into a step of +-lr, different in any two summation orders)."""
    module = build_module(spec)
    optimizer = make_optimizer(spec.optimizer, module.parameters(), spec.lr)
    named = dict(module.named_parameters())
    noise = {n: torch.zeros_like(p, dtype=torch.bool) for n, p in named.items()}
    losses = []
    for s in range(steps):
        loss = module(*batch(spec, s))
        loss.backward()
        _mark_noise(named, noise)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    return Reference(losses, {n: p.detach().clone() for n, p in named.items()}, noise)


def _mark_noise(named: dict[str, torch.nn.Parameter], noise: dict[str, torch.Tensor]) -> None:
    grads = {n: p.grad for n, p in named.items() if p.grad is not None}
    largest = max((g.abs().max().item() for g in grads.values()), default=0.0)
    for n, p in named.items():
        g = grads.get(n)
        noise[n] |= (g.abs() <= NOISE_FLOOR * largest) if g is not None else torch.ones_like(noise[n])
