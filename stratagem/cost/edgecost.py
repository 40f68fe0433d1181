"""Edge cost (TensorOpt Eq. 2): re-scheduling one tensor between two ops, both directions.

    forward   source layout -> each distinct layout the consumer reads the tensor in
              source: the producer's output; for a weight, its owner's input layout; for a graph
              input, the data loader's layout (data parallel over all devices, TensorOpt §4.2
              "Data loading": S(sample dim) on a 1-D mesh, R if the tensor has no sample dim)
    backward  (only if the tensor needs a gradient and has a source op) the consumer's
              input-gradient layout -> the producer's output-gradient layout
    reuse     when producer and consumer both keep the tensor for backward (TensorOpt §4.2):
              read as it is -> one shared buffer (`shared`: the consumer's copy is not extra);
              re-scheduled -> keep_both (default), keep_before, keep_after (costs.ReuseOption;
              keep_after only for the tensor's one consumer that keeps it);
              sliced locally -> the consumer keeps its slice beside the producer's shard.
              When only consumers keep it, each pays its own (several reading it as it is share
              one buffer: cost.sharing counts that, given the whole strategy or by FT's flag)
    memory    the reuse option's delta, plus a re-scheduled copy of a weight that a reader other
              than its owner keeps for backward (a tied LM head's gathered embedding)
"""

from __future__ import annotations

from dataclasses import dataclass

from stratagem.cost.costs import EdgeCost, ReuseOption
from stratagem.cost.memory import keeps_weight_copy, saved_tensors
from stratagem.cost.redistribute import Redistribution
from stratagem.errors import GraphError
from stratagem.ir import Role, dtype_bytes
from stratagem.space import Configuration
from stratagem.space.tensor_layout import TensorLayout, loader_layout, output_layout


def source_layouts(model, tensor: str, src_op: str | None, src_config: Configuration | None
                   ) -> tuple[TensorLayout, TensorLayout | None]:
    """(forward source layout, backward target layout or None)."""
    graph = model.graph
    if src_op is None:
        spec = graph.tensors[tensor]
        if spec.role is not Role.INPUT:
            raise GraphError(f"tensor {tensor!r} has no source op",
                             hint="Only graph inputs come from the data loader; pass the producer "
                                  "(or, for a weight, the op that owns it)")
        return loader_layout(spec, model.num_devices), None
    end = _source_end(graph, tensor, src_op)
    if end is None:
        lay = model.layout(src_op, src_config)
        return output_layout(lay), output_layout(lay, gradient=True)
    return (model.input_layout(src_op, src_config, end),
            model.input_layout(src_op, src_config, end, gradient=True))


def _source_end(graph, tensor: str, src_op: str) -> int | None:
    """None where the source op produces the tensor; the input it reads it at where it owns it (a weight)."""
    op = graph.op(src_op)
    if tensor in op.outputs:
        return None
    if tensor in op.inputs:
        return op.inputs.index(tensor)
    raise GraphError(f"op {src_op!r} neither produces nor reads tensor {tensor!r}")


@dataclass(frozen=True)
class EdgeFacts:
    """What an edge's cost reads of the graph besides the layouts at its two ends, found once per
    edge: edges with equal facts cost the same between equal layouts (`priced_edge`), so a table
    of configuration pairs, or a repeated layer's edges, price each pair of layouts once."""
    shape: tuple[int, ...]
    itemsize: int
    backward: bool                  # a gradient flows back to a source op
    reuse: tuple[bool, bool]        # (both ends keep the tensor for backward, another consumer keeps it)
    weight_copy: bool               # a reader other than the weight's owner keeps its copy (kept_weight_copy_bytes)
    recomputed: bool                # the consumer recomputes, moving its input again in backward


def edge_facts(model, tensor: str, src_op: str | None, dst_op: str) -> EdgeFacts:
    graph = model.graph
    consumer = graph.op(dst_op)
    _positions(graph, tensor, dst_op)
    spec = graph.tensors[tensor]
    kept = src_op is not None and tensor in saved_tensors(graph, consumer) \
        and tensor in saved_tensors(graph, graph.op(src_op))
    return EdgeFacts(spec.shape, dtype_bytes(spec.dtype), src_op is not None and tensor in graph.requires_grad,
                     (kept, kept and other_keepers(graph, tensor, dst_op)),
                     is_weight_edge(graph, tensor, src_op) and keeps_weight_copy(graph, consumer, tensor),
                     dst_op in model.recomputed)


def edge_signature(model, tensor: str, src_op: str | None, dst_op: str) -> tuple:
    """What an edge's cost under each pair of configurations depends on: its facts, and what gives
    the layouts at its ends (`source_layouts`, `consumer_layouts`): the first op alike at either
    end (CostModel._first_alike: equal op facts give equal layouts per configuration), whether the
    source writes or reads the tensor, and where the consumer reads it. Edges with equal signatures
    cost the same under the same configurations (a repeated layer's edges); a graph input's edge
    is its own."""
    graph = model.graph
    source = ("loader", tensor) if src_op is None else (model._first_alike(src_op), _source_end(graph, tensor, src_op))
    return (edge_facts(model, tensor, src_op, dst_op), source, model._first_alike(dst_op),
            _positions(graph, tensor, dst_op))


def consumer_layouts(model, facts: EdgeFacts, tensor: str, dst_op: str, dst_config: Configuration
                     ) -> tuple[tuple[TensorLayout, ...], tuple[TensorLayout, ...]]:
    """The distinct layouts the consumer reads the tensor in, and (when a gradient flows back) the
    distinct layouts of its input gradients."""
    positions = _positions(model.graph, tensor, dst_op)
    dst = _distinct(model.input_layout(dst_op, dst_config, i) for i in positions)
    grads = _distinct(model.input_layout(dst_op, dst_config, i, gradient=True) for i in positions) \
        if facts.backward else []
    return tuple(dst), tuple(grads)


def build_edge_cost(model, tensor: str, src_op: str | None, src_config: Configuration | None,
                    dst_op: str, dst_config: Configuration) -> EdgeCost:
    facts = edge_facts(model, tensor, src_op, dst_op)
    src, grad_target = source_layouts(model, tensor, src_op, src_config)
    return priced_edge(model, facts, src, grad_target, *consumer_layouts(model, facts, tensor, dst_op, dst_config))


def priced_edge(model, facts: EdgeFacts, src: TensorLayout, grad_target: TensorLayout | None,
                dst: tuple[TensorLayout, ...], grads: tuple[TensorLayout, ...]) -> EdgeCost:
    """The edge's cost from its facts and layouts: source_layouts' pair, consumer_layouts' pair."""
    forward = [model.rescheduler.plan(facts.shape, facts.itemsize, src, lay) for lay in dst]
    backward = [model.rescheduler.plan(facts.shape, facts.itemsize, g, grad_target) for g in grads]
    reuse = _reuse(model, facts, src, dst[0], forward[0])
    default = reuse[0] if reuse else None
    moves = [r for r in forward + backward if r.steps]
    kept_copy = kept_weight_copy_bytes(facts, dst[0]) if forward[0].steps else 0.0
    if facts.recomputed:      # the consumer's recomputation moves its input again in backward
        backward = forward + backward
    return EdgeCost(tuple(s for r in forward for s in r.steps), tuple(s for r in backward for s in r.steps),
                    sum(r.time_s for r in forward), sum(r.time_s for r in backward),
                    (default.memory_delta_bytes if default else 0.0) + kept_copy,
                    max((r.scratch_bytes for r in moves), default=0.0), reuse,
                    default.name if default else None)


def is_weight_edge(graph, tensor: str, src_op: str | None) -> bool:
    """The edge carries a weight from its owner (which reads it) to another reader."""
    return src_op is not None and tensor not in graph.op(src_op).outputs


def kept_weight_copy_bytes(facts: EdgeFacts, dst: TensorLayout) -> float:
    """A re-scheduled copy of a weight that its (non-owner) reader keeps until its backward
    (cost.memory.keeps_weight_copy): memory that stays, on the reader's devices; 0 otherwise."""
    if not facts.weight_copy:
        return 0.0
    return float(dst.local_num_elements(facts.shape) * facts.itemsize)


def _distinct(layouts) -> list[TensorLayout]:
    return list(dict.fromkeys(layouts))


def _positions(graph, tensor: str, dst_op: str) -> tuple[int, ...]:
    """Where the consumer reads the tensor."""
    positions = tuple(i for i, t in enumerate(graph.op(dst_op).inputs) if t == tensor)
    if not positions:
        raise GraphError(f"op {dst_op!r} does not read tensor {tensor!r}")
    return positions


def _reuse(model, facts: EdgeFacts, src: TensorLayout, dst: TensorLayout, forward: Redistribution
           ) -> tuple[ReuseOption, ...]:
    kept, kept_by_another = facts.reuse
    if not kept:
        return ()
    shape, itemsize = facts.shape, facts.itemsize
    if not forward.steps and src == dst:
        return (ReuseOption("shared", -float(dst.local_num_elements(shape) * itemsize), (), 0.0),)
    if not forward.steps:          # a local slice the consumer keeps beside the producer's shard
        return ()
    back = model.rescheduler.plan(shape, itemsize, dst, src)
    options = (ReuseOption("keep_both", 0.0, (), 0.0),
               ReuseOption("keep_before", -float(dst.local_num_elements(shape) * itemsize), forward.steps,
                           forward.time_s))
    if kept_by_another:
        return options
    return options + (ReuseOption("keep_after", -float(src.local_num_elements(shape) * itemsize), back.steps,
                                  back.time_s),)


def other_keepers(graph, tensor: str, dst_op: str) -> bool:
    """Whether another consumer keeps `tensor` for backward: the producer's buffer is then not
    dropped by this edge alone (another keep_after would credit it twice, and a consumer reading
    it as it is keeps it alive), so keep_after is not offered."""
    return any(q.name != dst_op and tensor in saved_tensors(graph, q) for q in graph.consumers.get(tensor, ()))
