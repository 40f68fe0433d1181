"""The runtime's own time per op, beyond the kernel: what `stratagem profile ops` adds to its table.

The runtime runs every op through DTensor (each input unwrapped with its gradient placements, the
local kernel, the outputs wrapped again: runtime.execute), which costs time no kernel table holds
and, on a CPU, more than a small kernel does. Each input is one more unwrap in forward and, when it
needs a gradient, one more autograd node in backward; so the time is per op and per input
(measured here: 160 us forward and 140 us backward for a one-input op, about 60 and 160 us more
for each further input). Measured on one rank, as one-device plans, for chains of `length` ops on
small tensors whose ops read k = 1, 2, 3 inputs (a weight times the input then negations; adds of a
weight; linears with a bias), each run by a PlanModule and as plain torch, forward and forward +
backward, `repeats` times each (medians):

    F_k = plan forward - plain forward,     B_k = (plan step - plan forward) - (plain step - plain forward)
    F_k = a_f * ops + b_f * (inputs read)          B_k = a_b * ops + b_b * (gradients handed back)

fitted by least squares over the three chains (`fit`): a_f, a_b per op, b_f per input, b_b per
input gradient (ComputeTable.runtime_overhead, a `RuntimeOverhead`).

A single-rank gloo group is made for it when none exists (and destroyed after).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F

from stratagem.cost.compute_table import RuntimeOverhead
from stratagem.ir import Graph, Op, TensorSpec
from stratagem.plan import Plan
from stratagem.runtime.timing import timed_s
from stratagem.space import Configuration

BATCH, WIDTH = 8, 64


@dataclass(frozen=True)
class Chain:
    """`length` ops `kind`(last output, its own weights of `weights`' shapes); with no weights
    (negations) the first op is a product with a weight, so that gradients flow."""
    kind: str
    weights: tuple[tuple[int, ...], ...]
    length: int = 16

    def _op_weights(self, i: int) -> list[tuple[str, tuple[int, ...]]]:
        shapes = self.weights or (((BATCH, WIDTH),) if i == 0 else ())
        return [(f"w{i}_{j}", shape) for j, shape in enumerate(shapes)]

    def graph(self) -> Graph:
        specs = [TensorSpec("x", (BATCH, WIDTH), role="input", sample_dim=0)]
        ops = []
        for i in range(self.length):
            weights = self._op_weights(i)
            specs += [TensorSpec(name, shape, role="weight") for name, shape in weights]
            specs.append(TensorSpec(f"h{i}", (BATCH, WIDTH), sample_dim=0))
            kind = "mul" if not self.weights and i == 0 else self.kind
            ops.append(Op(f"op{i}", kind, [f"h{i - 1}" if i else "x", *(n for n, _ in weights)], [f"h{i}"]))
        return Graph.build(f"overhead-{self.kind}", specs, ops, [f"h{self.length - 1}"])

    def plain(self, weights: dict[str, torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
        """The same chain in plain torch."""
        def run(x: torch.Tensor) -> torch.Tensor:
            h = x
            for i in range(self.length):
                w = [weights[name] for name, _ in self._op_weights(i)]
                if not self.weights:
                    h = h * w[0] if i == 0 else -h
                else:
                    h = h + w[0] if self.kind == "add" else F.linear(h, *w)
            return h
        return run


def counts(graph: Graph) -> tuple[int, int, int]:
    """(ops, inputs the ops read, of them those that need a gradient)."""
    inputs = [t for op in graph.ops for t in op.inputs]
    return len(graph.ops), len(inputs), sum(t in graph.requires_grad for t in inputs)


CHAINS = (Chain("neg", ()), Chain("add", ((BATCH, WIDTH),)), Chain("linear", ((WIDTH, WIDTH), (WIDTH,))))


def runtime_overhead(device: torch.device | str = "cpu", repeats: int = 30) -> RuntimeOverhead:
    device = torch.device(device)
    made_group = not dist.is_initialized()
    if made_group:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        rows = [(counts(chain.graph()), _overhead_s(chain, device, repeats)) for chain in CHAINS]
        return fit(rows, repeats)
    finally:
        if made_group:
            dist.destroy_process_group()


def fit(rows: list[tuple[tuple[int, int, int], tuple[float, float]]], repeats: int) -> RuntimeOverhead:
    """Least squares of F = a_f ops + b_f inputs and B = a_b ops + b_b gradients over the chains'
    ((ops, inputs, gradients), (F, B)); parts that come out negative (noise) are 0 and the other
    refitted alone."""
    a_f, b_f = _two_terms([(ops, inputs, f) for (ops, inputs, _), (f, _) in rows])
    a_b, b_b = _two_terms([(ops, grads, b) for (ops, _, grads), (_, b) in rows])
    return RuntimeOverhead(a_f, a_b, repeats, b_f, b_b)


def _two_terms(rows: list[tuple[int, int, float]]) -> tuple[float, float]:
    """Non-negative (a, b) minimising sum (a x + b y - t)^2."""
    sxx = sum(x * x for x, _, _ in rows)
    syy = sum(y * y for _, y, _ in rows)
    sxy = sum(x * y for x, y, _ in rows)
    sxt = sum(x * t for x, _, t in rows)
    syt = sum(y * t for _, y, t in rows)
    det = sxx * syy - sxy * sxy
    a, b = ((syy * sxt - sxy * syt) / det, (sxx * syt - sxy * sxt) / det) if det else (-1.0, -1.0)
    if a >= 0 and b >= 0:
        return a, b
    only_a, only_b = max(sxt / sxx, 0.0), max(syt / syy, 0.0)
    error_a = sum((only_a * x - t) ** 2 for x, _, t in rows)
    error_b = sum((only_b * y - t) ** 2 for _, y, t in rows)
    return (only_a, 0.0) if error_a <= error_b else (0.0, only_b)


def _overhead_s(chain: Chain, device: torch.device, repeats: int) -> tuple[float, float]:
    """(F, B) of one chain: the plan's time beyond plain torch's, forward and backward."""
    from stratagem.runtime.execute import PlanModule
    graph = chain.graph()
    plan = Plan(graph, "cpu-1x1", 1, {op.name: Configuration(()) for op in graph.ops})
    weights = {t.name: torch.randn(t.shape) * 0.1 for t in graph.tensors.values() if t.role.value == "weight"}
    planned = PlanModule(plan, weights, device)
    plain = chain.plain({k: w.to(device).requires_grad_(True) for k, w in weights.items()})
    x = torch.randn(BATCH, WIDTH)
    plan_forward, plan_step = _times(lambda: planned(x), device, repeats)
    plain_forward, plain_step = _times(lambda: plain(x.to(device)), device, repeats)
    return (max(plan_forward - plain_forward, 0.0),
            max((plan_step - plan_forward) - (plain_step - plain_forward), 0.0))


def _times(forward, device: torch.device, repeats: int) -> tuple[float, float]:
    """Median seconds of a forward, and of a forward and its backward."""
    def step():
        forward().sum().backward()

    for _ in range(3):
        step()
    forwards, steps = [], []
    for _ in range(repeats):
        forwards.append(timed_s(forward, device))
        steps.append(timed_s(step, device))
    return statistics.median(forwards), statistics.median(steps)
