"""What stays until backward but does not exist yet when an op runs forward (cost.transient's
made_q and later_q): the part of the additive memory P(S) that a transient term early in forward
does not come with.

    made_j(k)  = kept_inside_j(k) + sum over outputs t of j some op keeps of |t| / n
    least_j    = the same with kept_inside_j at its first input split over all n devices
    later_q    = sum over descendants j of q (ops reached from q's outputs) of least_j

|t| is t's bytes: no layout of t on n devices holds less than |t| / n on a device (its blocks
cover the tensor), whichever op keeps it, in whichever layout (the producer, a consumer reading
it as it is, or a consumer's re-scheduled copy under keep_after). A view makes no buffer (its
kept output is its source's, which may be older), nor does an op with no kept output; weight
copies kept for backward are left out (a sharded weight may be gathered ahead of its op). A
recomputed op keeps nothing inside in forward (cost.recompute). Descendants are found as bit
sets over the ops in program order, one OR per edge. Where ops run on parts of the devices, a
term on q's devices counts a descendant only if it runs on all of them (`later_on_devices`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from stratagem.cost.memory import kept_inside_bytes
from stratagem.ir import dtype_bytes
from stratagem.space import Configuration


def made_bytes(model, op_name: str, config: Configuration) -> float:
    """made_q(k): what q's forward makes that stays until its backward, at least, under `config`."""
    return model.op_cost(op_name, config).memory.kept_inside_bytes + _kept_outputs_bytes(model, op_name)


def descendant_bits(graph) -> tuple[int, ...]:
    """Per op in program order, a bit set of its descendants (bit j: op j reads, at any distance,
    what the op makes)."""
    below: list[int] = [0] * len(graph.ops)
    index = graph.op_index
    for i in range(len(graph.ops) - 1, -1, -1):
        for t in graph.ops[i].outputs:
            for reader in graph.consumers.get(t, ()):
                j = index[reader.name]
                below[i] |= below[j] | (1 << j)
    return tuple(below)


def later_kept_bytes(model) -> Mapping[str, float]:
    """later_q for every op q of the model's graph."""
    least = model.least_made
    return {op.name: _weighted(bits, least) for op, bits in zip(model.graph.ops, model.descendants)}


def later_on_devices(model, strategy: Mapping[str, Configuration]) -> Mapping[str, float]:
    """later_q where q's term is on q's devices: each descendant counts only if it runs on all of
    them (a descendant on other devices keeps nothing there). Every op on every device (FT's
    space): `model.later_kept`."""
    ranges = {name: strategy[name].devices for name in model.later_kept}
    if all(len(r) == model.num_devices for r in ranges.values()):
        return model.later_kept
    names = list(ranges)
    least = model.least_made
    found: dict[str, float] = {}
    by_range: dict[tuple[int, int], np.ndarray] = {}
    for name, bits in zip(names, model.descendants):
        r = ranges[name]
        key = (r.start, r.stop)
        if key not in by_range:
            by_range[key] = least * np.array([ranges[j].start <= r.start and r.stop <= ranges[j].stop for j in names])
        found[name] = _weighted(bits, by_range[key])
    return found


def least_made(model) -> np.ndarray:
    """least_j of every op in program order (CostModel.least_made keeps it)."""
    return np.array([_least_made_bytes(model, op.name) for op in model.graph.ops])


def _least_made_bytes(model, op_name: str) -> float:
    graph = model.graph
    op = graph.op(op_name)
    inside = 0.0
    if op.inputs and op_name not in model.recomputed and op_name not in model.offloaded:
        first = graph.tensors[op.inputs[0]]
        inside = kept_inside_bytes(graph, op, math.prod(first.shape) / model.num_devices, model.device.fused_kernels)
    return inside + _kept_outputs_bytes(model, op_name)


def least_bytes(model, tensor: str) -> float:
    """|t| / n: no layout of `tensor` on the model's n devices holds less on one device."""
    spec = model.graph.tensors[tensor]
    return math.prod(spec.shape) * dtype_bytes(spec.dtype) / model.num_devices


def _kept_outputs_bytes(model, op_name: str) -> float:
    if model.viewed_inputs[op_name] is not None:
        return 0.0
    kept = model.kept_tensors
    return sum(least_bytes(model, t) for t in model.graph.op(op_name).outputs if t in kept)


def _weighted(bits: int, weights: np.ndarray) -> float:
    """The sum of `weights[j]` over the set bits j of `bits`."""
    if not bits:
        return 0.0
    raw = np.frombuffer(bits.to_bytes((len(weights) + 7) // 8, "little"), dtype=np.uint8)
    mask = np.unpackbits(raw, bitorder="little")[:len(weights)].astype(bool)
    return float(weights[mask].sum())


__all__ = ["descendant_bits", "least_made", "later_kept_bytes", "later_on_devices", "least_bytes", "made_bytes"]
