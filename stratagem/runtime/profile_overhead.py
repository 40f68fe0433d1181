"""The runtime's own time per op, beyond the kernel: what `stratagem profile ops` adds to its table.

The runtime runs every op through DTensor (each input unwrapped with its gradient placements, the
local kernel, the outputs wrapped again: runtime.execute), which costs time no kernel table holds
and, on a CPU, more than a small kernel does. Each input is one more unwrap in forward and, when it
needs a gradient, one more autograd node in backward; so the time is per op and per input
(measured here on one device: 160 us forward and 140 us backward for a one-input op, about 60 and
160 us more for each further input). Measured for chains of `length` ops on small tensors whose ops
read one or two inputs (a weight times the input then negations; adds of a weight of the input's
shape), each run by a PlanModule and as plain torch on the same local tensors, forward and forward +
backward, `repeats` times each (means, as profile_ops):

    F_k = plan forward - plain forward,     B_k = (plan step - plan forward) - (plain step - plain forward)
    F_k = a_f * ops + b_f * (inputs read)          B_k = a_b * ops + b_b * (gradients handed back)

fitted by least squares over the chains (`fit`): a_f, a_b per op, b_f per input, b_b per
input gradient (ComputeTable.runtime_overhead, a `RuntimeOverhead`).

Under N > 1 ranks (`stratagem profile ops --nproc N`) every rank measures side by side, with the
chains' tensors N times as long and every op split over the N ranks along them (as the ranks run a
plan: sharded DTensors on an N-device mesh, which cost more per op than on one device: about 1.5x
forward here); rank 0 is handed the slowest rank's figures (profile_ops.slowest_rank). Alone, a
single-rank gloo group is made for it when none exists (and destroyed after).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from stratagem.cost.compute_table import RuntimeOverhead
from stratagem.ir import Graph, Op, TensorSpec
from stratagem.plan import Plan
from stratagem.runtime.timing import timed_s
from stratagem.space import Configuration
from stratagem.tdl.graphops import AnalysisCache

BATCH, WIDTH = 8, 64          # each rank's share


@dataclass(frozen=True)
class Chain:
    """`length` ops `kind`(last output, its own weights of `weights`' shapes): `add` with one
    weight, or `neg` with none, whose first op is then a product with a weight (so that gradients
    flow)."""
    kind: str
    weights: tuple[tuple[int, ...], ...]
    length: int = 16

    def _op_weights(self, i: int, ranks: int = 1) -> list[tuple[str, tuple[int, ...]]]:
        shapes = self.weights or (((BATCH, WIDTH),) if i == 0 else ())
        return [(f"w{i}_{j}", _rows(shape, ranks)) for j, shape in enumerate(shapes)]

    def graph(self, ranks: int = 1) -> Graph:
        """Its tensors `ranks` times as long (on each rank its share is as on one)."""
        specs = [TensorSpec("x", (BATCH * ranks, WIDTH), role="input", sample_dim=0)]
        ops = []
        for i in range(self.length):
            weights = self._op_weights(i, ranks)
            specs += [TensorSpec(name, shape, role="weight") for name, shape in weights]
            specs.append(TensorSpec(f"h{i}", (BATCH * ranks, WIDTH), sample_dim=0))
            kind = "mul" if not self.weights and i == 0 else self.kind
            ops.append(Op(f"op{i}", kind, [f"h{i - 1}" if i else "x", *(n for n, _ in weights)], [f"h{i}"]))
        return Graph.build(f"overhead-{self.kind}", specs, ops, [f"h{self.length - 1}"])

    def plain(self, weights: dict[str, torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
        """The same chain in plain torch."""
        def run(x: torch.Tensor) -> torch.Tensor:
            h = x
            for i in range(self.length):
                w = [weights[name] for name, _ in self._op_weights(i)]
                h = (h * w[0] if i == 0 else -h) if not self.weights else h + w[0]
            return h
        return run


def _rows(shape: tuple[int, ...], ranks: int) -> tuple[int, ...]:
    """A weight of the input's shape grows with it (so that it is split with it, no collective)."""
    return (shape[0] * ranks, *shape[1:]) if shape == (BATCH, WIDTH) else shape


def counts(graph: Graph) -> tuple[int, int, int]:
    """(ops, inputs the ops read, of them those that need a gradient)."""
    inputs = [t for op in graph.ops for t in op.inputs]
    return len(graph.ops), len(inputs), sum(t in graph.requires_grad for t in inputs)


# one and two inputs per op, split over ranks without a collective (elementwise, every input of
# the input's shape)
CHAINS = (Chain("neg", ()), Chain("add", ((BATCH, WIDTH),)))


def runtime_overhead(device: torch.device | str = "cpu", repeats: int = 30) -> RuntimeOverhead:
    """Alone, or on every rank of the process group side by side (module docstring)."""
    device = torch.device(device)
    made_group = not dist.is_initialized()
    if made_group:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        ranks = dist.get_world_size()
        rows = [(counts(chain.graph()), _overhead_s(chain, device, repeats, ranks)) for chain in CHAINS]
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


def _overhead_s(chain: Chain, device: torch.device, repeats: int, ranks: int) -> tuple[float, float]:
    """(F, B) of one chain: the plan's time beyond plain torch's on the same local tensors, forward
    and backward; over `ranks` ranks every op split along the tensors' rows."""
    from stratagem.runtime.execute import PlanModule
    from stratagem.runtime.meshes import MeshBook
    graph = chain.graph(ranks)
    plan = Plan(graph, f"cpu-1x{ranks}", ranks, _split_rows(graph, ranks))
    weights = {t.name: torch.randn(t.shape) * 0.1 for t in graph.tensors.values() if t.role.value == "weight"}
    meshes = MeshBook((), ranks, device.type) if ranks > 1 else None
    planned = PlanModule(plan, weights, device, meshes)
    share = chain.graph()
    local = {t.name: torch.randn(t.shape).to(device).requires_grad_(True) for t in share.tensors.values()
             if t.role.value == "weight"}
    plain = chain.plain(local)
    x = torch.randn(BATCH * ranks, WIDTH)
    mine = x[dist.get_rank() * BATCH:(dist.get_rank() + 1) * BATCH] if ranks > 1 else x
    plan_forward, plan_step = _times(lambda: planned(mine), device, repeats, ranks > 1)
    plain_forward, plain_step = _times(lambda: plain(mine.to(device)), device, repeats, ranks > 1)
    return (max(plan_forward - plain_forward, 0.0),
            max((plan_step - plan_forward) - (plain_step - plain_forward), 0.0))


def _split_rows(graph: Graph, ranks: int) -> dict[str, Configuration]:
    """Every op split `ranks` ways along its sample dim (all of a chain's tensors have the rows)."""
    if ranks == 1:
        return {op.name: Configuration(()) for op in graph.ops}
    analyses = AnalysisCache(graph)
    sample = {op.name: next(d.name for d in analyses[op.name].dims if d.kind == "sample") for op in graph.ops}
    return {op: Configuration.of(**{dim: ranks}) for op, dim in sample.items()}


def _times(forward, device: torch.device, repeats: int, together: bool = False) -> tuple[float, float]:
    """Mean seconds of a forward, and of a forward and its backward; `together`: the ranks start
    at a barrier, so that they run side by side."""
    def step():
        forward().sum().backward()

    for _ in range(3):
        step()
    if together:
        dist.barrier()
    forwards, steps = [], []
    for _ in range(repeats):
        forwards.append(timed_s(forward, device))
        steps.append(timed_s(step, device))
    return statistics.fmean(forwards), statistics.fmean(steps)
