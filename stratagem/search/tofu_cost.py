"""Tofu's objective (Tofu §5, Appendix A.3): total bytes communicated, from the TDL regions.

Every op of a Tofu plan runs on all K workers (a nested configuration, one level per recursive
step); worker w computes its region and reads, per input, the box `TensorLayout.device_box` gives
(the TDL's `Analysis.split` regions, combined over the levels). No bandwidth and no time: bytes.

Activation tensor t from producer p to consumer q (`edge_elements`):
    forward   worker w needs N(w) (q's input box of t) and holds O(w) (p's output box); when p
              split a reduction dim the output is r partial sums, each element held r ways.
              w receives every partial of every element it needs, less the one it has:
                  fwd = sum_w r |N(w)| - |N(w) ∩ O(w)|     (r = 1: the bytes of N(w) it lacks)
    backward  the same with the roles swapped: p's workers need the gradient over their output
              box, q's workers hold partial gradients over their input box (partial across the
              axes on which q does not split t: `TensorLayout` of the input gradient)
Weight W read by the ops of one node (`weight_elements`): stored split across the workers that
read each region (Tofu never replicates storage), fetched before forward and its gradient
reduced onto the owners after backward: for each distinct region R read by c_R workers,
(c_R - 1)|R| each way, i.e.
                  2 (sum_w |N(w)| - sum of the distinct regions' sizes)
which is 2 (r - 1) |W| for a weight replicated r ways (an all-reduce's traffic), 0 when split.
Graph inputs come from the data loader in any layout: free. Shared-weight nodes (unrolled
timesteps) fetch and reduce their weight once.

`TofuCost.total_bytes(strategy)` sums both over a whole strategy; `node_bytes` and `edge_bytes`
split it over a coarsened graph, so that one recursive step is a min-sum problem (tofu.py).
Results are cached by everything they depend on (analysis keys, shapes, configurations), so
repeated layers are computed once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from stratagem.space.tensor_layout import TensorLayout
from stratagem.ir import Role, dtype_bytes
from stratagem.space import Configuration, Partial
from stratagem.tdl.graphops import analysis_key

WEIGHT_ROLES = (Role.WEIGHT, Role.BUFFER)


def boxes(layout: TensorLayout, shape: tuple[int, ...]) -> np.ndarray:
    """[workers, dims, 2] half-open boxes, one per device of the layout."""
    return np.array([layout.device_box(d, shape) for d in layout.devices], dtype=np.int64).reshape(
        layout.num_devices, len(shape), 2)


def partial_degree(layout: TensorLayout) -> int:
    return math.prod(s for s, p in zip(layout.mesh_shape, layout.placements) if isinstance(p, Partial))


def transfer_elements(need: TensorLayout, held: TensorLayout, shape: tuple[int, ...]) -> float:
    """sum_w r |N(w)| - |N(w) ∩ H(w)| (see the module docstring); both layouts on one block."""
    if not shape:
        return float(partial_degree(held) * need.num_devices - need.num_devices)
    n, h = boxes(need, shape), boxes(held, shape)
    need_sizes = np.prod(n[:, :, 1] - n[:, :, 0], axis=1)
    overlap = np.clip(np.minimum(n[:, :, 1], h[:, :, 1]) - np.maximum(n[:, :, 0], h[:, :, 0]), 0, None)
    return float(partial_degree(held) * need_sizes.sum() - np.prod(overlap, axis=1).sum())


def weight_transfer_elements(need: TensorLayout, shape: tuple[int, ...]) -> float:
    if not shape:
        return 2.0 * (need.num_devices - 1)
    n = boxes(need, shape)
    sizes = np.prod(n[:, :, 1] - n[:, :, 0], axis=1)
    distinct = {tuple(map(tuple, b)): s for b, s in zip(n, sizes)}
    return 2.0 * float(sizes.sum() - sum(distinct.values()))


class TofuCost:
    """Communication bytes of strategies on one graph (see the module docstring)."""

    def __init__(self, model):
        self.model, self.graph = model, model.graph
        self._edges: dict[tuple, float] = {}
        self._weights: dict[tuple, float] = {}
        self._keys = {op.name: analysis_key(self.graph, op) for op in self.graph.ops}
        self.activation_edges = tuple((e.tensor, e.src_op, e.dst_op) for e in model.edges()
                                      if e.src_op is not None and e.tensor in self.graph.producer)

    # ---- pieces -------------------------------------------------------------------------------
    def edge_bytes(self, tensor: str, src_op: str, src: Configuration, dst_op: str, dst: Configuration) -> float:
        """Forward plus backward bytes of one activation tensor between two ops."""
        graph = self.graph
        index = graph.op(dst_op).inputs.index(tensor)
        spec = graph.tensors[tensor]
        key = (self._keys[src_op], self._keys[dst_op], index, spec.shape, spec.dtype, src, dst)
        found = self._edges.get(key)
        if found is None:
            layouts = self.model.layouts
            forward = transfer_elements(layouts.input_layout(dst_op, dst, index),
                                        layouts.output_layout(src_op, src), spec.shape)
            backward = transfer_elements(layouts.output_layout(src_op, src, gradient=True),
                                         layouts.input_layout(dst_op, dst, index, gradient=True), spec.shape)
            found = self._edges[key] = (forward + backward) * dtype_bytes(spec.dtype)
        return found

    def weight_bytes(self, tensor: str, reader: str, config: Configuration) -> float:
        spec = self.graph.tensors[tensor]
        index = self.graph.op(reader).inputs.index(tensor)
        key = (self._keys[reader], index, config)
        found = self._weights.get(key)
        if found is None:
            need = self.model.layouts.input_layout(reader, config, index)
            found = self._weights[key] = weight_transfer_elements(need, spec.shape) * dtype_bytes(spec.dtype)
        return found

    def weights_read(self, ops) -> dict[str, str]:
        """Each weight the ops read, with the first op reading it (one fetch per node)."""
        found: dict[str, str] = {}
        for name in ops:
            for t in self.graph.op(name).inputs:
                if self.graph.tensors[t].role in WEIGHT_ROLES:
                    found.setdefault(t, name)
        return found

    # ---- whole strategies ---------------------------------------------------------------------
    def total_bytes(self, strategy: Mapping[str, Configuration], nodes=None) -> float:
        """All activation edges, and every weight once per node (`nodes`: tuples of op names;
        None: each op its own node)."""
        nodes = nodes or [(op.name,) for op in self.graph.ops]
        total = sum(self.edge_bytes(t, p, strategy[p], q, strategy[q]) for t, p, q in self.activation_edges)
        for members in nodes:
            for tensor, reader in self.weights_read(members).items():
                total += self.weight_bytes(tensor, reader, strategy[reader])
        return float(total)


__all__ = ["TofuCost", "boxes", "partial_degree", "transfer_elements", "weight_transfer_elements"]
