"""What lives only while an op runs: the transient part of peak memory (one memory model for FT,
the cost model's plan totals and the simulator).

Per device, the peak memory of a training iteration under strategy S is modelled as

    peak(S) = P(S) + T(S)
    P(S)    = what stays until backward, additive along the graph (TensorOpt Eq. 3's memory):
              weights, gradients, optimizer state, saved activations, kept re-scheduled copies
    T(S)    = max over ops i and edges e of what lives only while one op runs forward:
        node term  T_i(k)       = i's outputs that no op keeps for backward, in i's layout
                                  (a view has none: it aliases the buffer it reads)
        edge term  T_e(k, p, r) = (from the data loader or a weight's owner: only the consumer's
                                  re-scheduled copy unless it keeps it, and the scratch, + T_dst(p))
                                  the source's buffer of the tensor, unless it is kept for backward
                                  (by its producer, or by a consumer reading it as it is: this
                                  one, or another, cost.sharing's flag for FT)
                                + the consumer's re-scheduled copy, unless the consumer keeps it
                                  (under reuse option r: keep_before drops it, keep_after drops the
                                  producer's copy instead)
                                + the re-scheduling scratch
                                + T_dst(p)   (the consumer's outputs appear while its inputs live)

Both terms are pairwise in the configurations, so FT carries T beside its sums (search.ft_peak:
one FT pass per threshold on T). The simulator measures the peak on its timeline; the two agree
where the peak comes at the end of forward (every saved activation live) with one large transient
at a time, as in the decoders' logits. Where several large transients overlap, or the largest comes
early in forward while few activations are saved yet, the model overestimates the simulated peak;
`benchmarks/frontier_agreement.py` measures by how much.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from stratagem.cost.memory import keeps_input, saved_tensors, viewed_input
from stratagem.cost.sharing import kept_producer_buffers
from stratagem.ir import dtype_bytes
from stratagem.space import Configuration, Edge


def op_transient_bytes(model, op_name: str, config: Configuration) -> float:
    """T_i(k): the op's outputs no op keeps for backward, per device of the configuration."""
    graph = model.graph
    op = graph.op(op_name)
    if viewed_input(graph, op) is not None:
        return 0.0
    layout = model.layouts.output_layout(op_name, config)
    kept = model.kept_tensors
    return float(sum(layout.local_num_elements(graph.tensors[t].shape) * dtype_bytes(graph.tensors[t].dtype)
                     for t in op.outputs if t not in kept))


def edge_transient_bytes(model, edge: Edge, src_config: Configuration | None, dst_config: Configuration,
                         option: str | None = None, kept_by_another: bool = False) -> float:
    """T_e(k, p, r): what lives while the consumer of `edge` runs forward because of this edge.
    `kept_by_another`: another consumer keeps the producer's buffer, reading it as it is."""
    own = op_transient_bytes(model, edge.dst_op, dst_config)
    cost = model.edge_cost(edge.tensor, edge.src_op, src_config, edge.dst_op, dst_config)
    spec = model.graph.tensors[edge.tensor]
    itemsize = dtype_bytes(spec.dtype)
    position = model.graph.op(edge.dst_op).inputs.index(edge.tensor)
    dst_bytes = model.input_layout(edge.dst_op, dst_config, position).local_num_elements(spec.shape) * itemsize
    if not _produced(model, edge):
        return _unproduced_term(keeps_input(model.graph, model.graph.op(edge.dst_op), edge.tensor), cost, own, dst_bytes)
    src_layout = model.layouts.output_layout(edge.src_op, src_config)
    dst_layout = model.input_layout(edge.dst_op, dst_config, position)
    return _edge_term(_keeps(model, edge), cost, option or cost.default_reuse, kept_by_another, own,
                      src_layout.local_num_elements(spec.shape) * itemsize, dst_bytes,
                      src_layout == dst_layout)


def edge_transient_table(model, edge: Edge, src_configs, dst_configs, costs, option_names,
                         kept_by_another: bool = False) -> np.ndarray:
    """[R, K_src, K_dst]: T_e over every pair of configurations and reuse option (np.inf where a
    pair has fewer options); `costs[i][j]` the edge's cost and `option_names[i * K_dst + j]` its
    options, as search.space prices them. Equal to `edge_transient_bytes` entry by entry, with each
    configuration's layouts and buffer sizes computed once."""
    ks, kd = len(src_configs), len(dst_configs)
    table = np.full((max(len(n) for n in option_names), ks, kd), np.inf)
    own = [op_transient_bytes(model, edge.dst_op, c) for c in dst_configs]
    spec = model.graph.tensors[edge.tensor]
    itemsize = dtype_bytes(spec.dtype)
    position = model.graph.op(edge.dst_op).inputs.index(edge.tensor)
    dst = [model.input_layout(edge.dst_op, c, position) for c in dst_configs]
    dst_bytes = [lay.local_num_elements(spec.shape) * itemsize for lay in dst]
    if not _produced(model, edge):
        consumer_keeps = keeps_input(model.graph, model.graph.op(edge.dst_op), edge.tensor)
        for i in range(ks):
            for j in range(kd):
                table[:len(option_names[i * kd + j]) or 1, i, j] = _unproduced_term(
                    consumer_keeps, costs[i][j], own[j], dst_bytes[j])
        return table
    src = [model.layouts.output_layout(edge.src_op, c) for c in src_configs]
    src_bytes = [lay.local_num_elements(spec.shape) * itemsize for lay in src]
    keeps = _keeps(model, edge)
    for i in range(ks):
        for j in range(kd):
            cost = costs[i][j]
            for r, name in enumerate(option_names[i * kd + j]):
                table[r, i, j] = _edge_term(keeps, cost, name or cost.default_reuse, kept_by_another, own[j],
                                            src_bytes[i], dst_bytes[j], src[i] == dst[j])
    return table


def _produced(model, edge: Edge) -> bool:
    return edge.src_op is not None and edge.tensor in model.graph.op(edge.src_op).outputs


def _unproduced_term(consumer_keeps: bool, cost, own: float, dst_bytes: float) -> float:
    """T_e of an edge from the data loader or from a weight's owner: the source is the loader's
    batch or the resident weight; only a re-scheduled copy and its scratch are new."""
    total = own
    if cost.forward_steps:
        total += cost.temporary_bytes + (0.0 if consumer_keeps else dst_bytes)
    return float(total)


def _keeps(model, edge: Edge) -> tuple[bool, bool]:
    """Whether the producer, and the consumer, keep the edge's tensor for backward."""
    graph = model.graph
    return (edge.tensor in saved_tensors(graph, graph.op(edge.src_op)),
            edge.tensor in saved_tensors(graph, graph.op(edge.dst_op)))


def _edge_term(keeps: tuple[bool, bool], cost, option: str | None, kept_by_another: bool, own: float,
               src_bytes: float, dst_bytes: float, reads_as_is: bool) -> float:
    """T_e from its pieces (the module's formula)."""
    producer_keeps = (keeps[0] and option != "keep_after") or kept_by_another
    consumer_keeps = keeps[1] and option != "keep_before"
    total = own
    if not (producer_keeps or (consumer_keeps and reads_as_is)):
        total += src_bytes
    if cost.forward_steps:
        total += cost.temporary_bytes
        if not consumer_keeps:
            total += dst_bytes
    return float(total)


def transient_terms(model, strategy: Mapping[str, Configuration]) -> Iterator[tuple[float, tuple[int, ...], str]]:
    """Every term of T(S): (bytes, the devices it is on, the op or edge)."""
    for op in model.graph.ops:
        config = strategy[op.name]
        yield op_transient_bytes(model, op.name, config), config.devices, op.name
    reuse = getattr(strategy, "reuse", {})
    shared = kept_producer_buffers(model, strategy)
    for edge in model.edges():
        src = strategy[edge.src_op] if edge.src_op else None
        dst = strategy[edge.dst_op]
        yield (edge_transient_bytes(model, edge, src, dst, reuse.get(edge), edge.tensor in shared),
               dst.devices, str(edge))


def plan_transient(model, strategy: Mapping[str, Configuration]) -> tuple[float, str]:
    """T(S) of a whole strategy, and where it is reached (an op name or an edge)."""
    return max(((num_bytes, where) for num_bytes, _, where in transient_terms(model, strategy)),
               default=(0.0, ""))
