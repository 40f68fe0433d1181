"""What an iteration achieves: tokens (or samples) per second and model FLOPs utilization (MFU).

    model FLOPs  = 3 x the forward FLOPs of every op, whole (its TDL description's count):
                   backward costs about twice forward (PaLM, Chowdhery et al. 2022, App. B: 6N
                   per token for a decoder of N parameters; recomputation is not counted)
    MFU          = model FLOPs / (iteration time x devices x the device's matrix peak in the
                   precision the graph computes in)
    tokens       = batch x sequence of the first integer input with a sample dim and a second
                   dim (token ids); samples otherwise
"""

from __future__ import annotations

from dataclasses import dataclass

from stratagem.ir import Graph


@dataclass(frozen=True)
class Throughput:
    items_per_s: float
    unit: str                # "tokens" or "samples"
    mfu: float | None        # None where the device has no peak for the graph's dtype


def model_flops(model) -> float:
    """Forward and backward FLOPs of one iteration of the whole model (3x forward)."""
    return 3.0 * sum(model.analyses[op.name].flops() or 0.0 for op in model.graph.ops)


def items_per_iteration(graph: Graph) -> tuple[int, str]:
    for name in graph.inputs:
        spec = graph.tensors[name]
        if spec.sample_dim is not None and len(spec.shape) >= 2 and spec.dtype.startswith("int"):
            return spec.shape[0] * spec.shape[1], "tokens"
    for name in graph.inputs:
        spec = graph.tensors[name]
        if spec.sample_dim is not None:
            return spec.shape[spec.sample_dim], "samples"
    return 1, "iterations"


def throughput(model, iteration_time_s: float, micro_batches: int = 1) -> Throughput:
    """`micro_batches`: the iteration runs the model's graph (one micro-batch's) that many times."""
    items, unit = items_per_iteration(model.graph)
    items *= micro_batches
    dtype = next((s.dtype for s in model.graph.tensors.values() if s.dtype in ("bfloat16", "float16")), "float32")
    peak = model.device.peak_flops_per_s(dtype, True)
    mfu = micro_batches * model_flops(model) / (iteration_time_s * model.num_devices * peak) if peak and iteration_time_s > 0 else None
    return Throughput(items / iteration_time_s if iteration_time_s > 0 else float("nan"), unit, mfu)
