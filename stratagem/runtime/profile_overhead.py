"""The runtime's own time per op, beyond the kernel: what `stratagem profile ops` adds to its table.

The runtime runs every op through DTensor (each input unwrapped with its gradient placements, the
local kernel, the outputs wrapped again: runtime.execute), which costs time no kernel table holds
and, on a CPU, more than a small kernel does. Measured on one rank, as a one-device plan:

    a chain of `length` elementwise ops on a small tensor (a weight times the input, then negations),
    run by a PlanModule and as plain torch, forward and forward + backward, `repeats` times each
    forward overhead   (plan forward - plain forward) / length            (medians)
    backward overhead  (plan step - plan forward - (plain step - plain forward)) / length

A single-rank gloo group is made for it when none exists (and destroyed after).
"""

from __future__ import annotations

import statistics

import torch
import torch.distributed as dist

from stratagem.cost import OpTiming
from stratagem.ir import Graph, Op, TensorSpec
from stratagem.plan import Plan
from stratagem.runtime.timing import timed_s
from stratagem.space import Configuration

WIDTH = (8, 64)


def chain(length: int) -> Graph:
    specs = [TensorSpec("x", WIDTH, role="input", sample_dim=0), TensorSpec("w", WIDTH, role="weight"),
             *(TensorSpec(f"h{i}", WIDTH, sample_dim=0) for i in range(length))]
    ops = [Op("op0", "mul", ["x", "w"], ["h0"]),
           *(Op(f"op{i}", "neg", [f"h{i - 1}"], [f"h{i}"]) for i in range(1, length))]
    return Graph.build("overhead-chain", specs, ops, [f"h{length - 1}"])


def runtime_overhead(device: torch.device | str = "cpu", length: int = 16, repeats: int = 30) -> OpTiming:
    device = torch.device(device)
    made_group = not dist.is_initialized()
    if made_group:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        return _measured(device, length, repeats)
    finally:
        if made_group:
            dist.destroy_process_group()


def _measured(device: torch.device, length: int, repeats: int) -> OpTiming:
    from stratagem.runtime.execute import PlanModule
    graph = chain(length)
    plan = Plan(graph, "cpu-1x1", 1, {op.name: Configuration(()) for op in graph.ops})
    weight = torch.randn(WIDTH)
    planned = PlanModule(plan, {"w": weight}, device)
    w = weight.to(device).requires_grad_(True)
    x = torch.randn(WIDTH)

    def plain(inputs):
        h = inputs * w
        for _ in range(1, length):
            h = -h
        return h

    plan_forward, plan_step = _times(lambda: planned(x), device, repeats)
    plain_forward, plain_step = _times(lambda: plain(x.to(device)), device, repeats)
    forward_s = max(plan_forward - plain_forward, 0.0) / length
    backward_s = max((plan_step - plan_forward) - (plain_step - plain_forward), 0.0) / length
    return OpTiming(forward_s, backward_s, repeats)


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
