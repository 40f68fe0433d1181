"""What lives only while an op runs: the transient part of peak memory (one memory model for FT,
the cost model's plan totals and the simulator).

Per device, the peak memory of a training iteration under strategy S is modelled as

    peak(S) = P(S) + T(S)
    P(S)    = what stays until backward, additive along the graph (TensorOpt Eq. 3's memory):
              weights, gradients, optimizer state, saved activations, kept re-scheduled copies
    T(S)    = max over ops i and edges e of what lives only while one op runs forward:
        node term  T_i(k)       = i's outputs that no op keeps for backward, in i's layout
                                  (a view has none: it aliases the buffer it reads)
        edge term  T_e(k, p, r) = the source's buffer of the tensor, unless it is kept for backward
                                  (by its producer, or by this consumer reading it as it is)
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

from stratagem.cost.memory import saved_tensors, viewed_input
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
                         option: str | None = None) -> float:
    """T_e(k, p, r): what lives while the consumer of `edge` runs forward because of this edge."""
    graph = model.graph
    own = op_transient_bytes(model, edge.dst_op, dst_config)
    if edge.src_op is None or edge.tensor not in graph.op(edge.src_op).outputs:
        return own                       # graph inputs and weights: resident or loader-owned
    cost = model.edge_cost(edge.tensor, edge.src_op, src_config, edge.dst_op, dst_config)
    option = option or cost.default_reuse
    spec = graph.tensors[edge.tensor]
    consumer = graph.op(edge.dst_op)
    itemsize = dtype_bytes(spec.dtype)
    src_layout = model.layouts.output_layout(edge.src_op, src_config)
    dst_layout = model.input_layout(edge.dst_op, dst_config, consumer.inputs.index(edge.tensor))
    producer_keeps = edge.tensor in saved_tensors(graph, graph.op(edge.src_op)) and option != "keep_after"
    consumer_keeps = edge.tensor in saved_tensors(graph, consumer) and option != "keep_before"
    reads_as_is = src_layout == dst_layout
    total = own
    if not (producer_keeps or (consumer_keeps and reads_as_is)):
        total += src_layout.local_num_elements(spec.shape) * itemsize
    if cost.forward_steps:
        total += cost.temporary_bytes
        if not consumer_keeps:
            total += dst_layout.local_num_elements(spec.shape) * itemsize
    return float(total)


def transient_terms(model, strategy: Mapping[str, Configuration]) -> Iterator[tuple[float, tuple[int, ...], str]]:
    """Every term of T(S): (bytes, the devices it is on, the op or edge)."""
    for op in model.graph.ops:
        config = strategy[op.name]
        yield op_transient_bytes(model, op.name, config), config.devices, op.name
    reuse = getattr(strategy, "reuse", {})
    for edge in model.edges():
        src = strategy[edge.src_op] if edge.src_op else None
        dst = strategy[edge.dst_op]
        yield edge_transient_bytes(model, edge, src, dst, reuse.get(edge)), dst.devices, str(edge)


def plan_transient(model, strategy: Mapping[str, Configuration]) -> tuple[float, str]:
    """T(S) of a whole strategy, and where it is reached (an op name or an edge)."""
    return max(((num_bytes, where) for num_bytes, _, where in transient_terms(model, strategy)),
               default=(0.0, ""))
