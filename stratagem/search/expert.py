"""Expert-designed strategies (FlexFlow §8.1.1), one of MCMC's initial candidates.

    CNNs   Krizhevsky's one weird trick (`strategies.owt_strategy`): data parallel for convolutions
           and pooling, model parallel for the densely-connected layers.
    RNNs   Wu et al. 2016 (GNMT): "data parallelism that replicates the entire operator graph on
           each compute node and model parallelism that assigns operators with the same depth to
           the same GPU on each node" (`rnn_expert_strategy`):
               layer(op)   ops reading the same weights are one layer (the unrolled timesteps of a
                           recurrent layer); an op without weights joins the layer of its latest
                           producer                                              `layers`
               slot(L)     layers in order of first appearance, in contiguous runs of about equal
                           compute over the g GPUs of a node                     `_slots`
               config      N <= g: op of layer L alone on GPU slot(L).
                           N = n * g > g: GPU slot(L) of every node, batch split n ways. A
                           configuration is an aligned contiguous block of devices, so that
                           strided set cannot be written; we use the transposed layout instead,
                           block slot(L) of n devices with the batch split n ways: the same
                           degrees of data and model parallelism, with the layer-to-layer traffic
                           on the slower links (`_block`).
A graph is recurrent when some weight is read by several ops with one signature (timesteps).
"""

from __future__ import annotations

from stratagem.ir import Graph, Role
from stratagem.plan import Plan
from stratagem.search.context import NoOptions, make_plan
from stratagem.search.strategies import balanced_blocks, batch_dim, owt_strategy, valid
from stratagem.space import Configuration, Level
from stratagem.tdl.graphops import analysis_key


def is_recurrent(graph: Graph) -> bool:
    readers: dict[tuple, int] = {}
    for op in graph.ops:
        for t in op.inputs:
            if graph.tensors[t].role is Role.WEIGHT:
                key = (t, analysis_key(graph, op))
                readers[key] = readers.get(key, 0) + 1
    return any(count > 1 for count in readers.values())


def layers(graph: Graph) -> dict[str, int]:
    """Layer of every op, numbered by first appearance in topological order."""
    layer_of_weight: dict[str, int] = {}
    out: dict[str, int] = {}
    for op in graph.ops:
        weights = [t for t in op.inputs if graph.tensors[t].role is Role.WEIGHT]
        known = [layer_of_weight[w] for w in weights if w in layer_of_weight]
        if known:
            layer = known[0]
        elif weights:
            layer = len(set(layer_of_weight.values()) | set(out.values()))
        else:
            producers = [graph.producer[t].name for t in op.inputs if t in graph.producer]
            latest = max(producers, key=lambda name: graph.op_index[name]) if producers else None
            layer = out[latest] if latest is not None else 0
        for w in weights:
            layer_of_weight.setdefault(w, layer)
        out[op.name] = layer
    return out


def _slots(ctx, layer_of: dict[str, int], num_slots: int) -> dict[int, int]:
    num_layers = max(layer_of.values()) + 1
    work = [0.0] * num_layers
    for op in ctx.graph.ops:
        work[layer_of[op.name]] += ctx.model.op_cost(op.name, Configuration((), 0)).compute_time_s
    return dict(enumerate(balanced_blocks(work, num_slots)))


def _block(ctx, op_name: str, slot: int, size: int) -> Configuration:
    if size == 1:
        return Configuration((), slot)
    analysis = ctx.model.analyses[op_name]
    dim = batch_dim(analysis)
    config = Configuration((Level(dim, size),), slot * size) if dim else None
    return config if config is not None and valid(analysis, config) else \
        Configuration((Level(None, size),), slot * size)


def rnn_expert_strategy(ctx) -> dict[str, Configuration]:
    per_node = ctx.cluster.spec.devices_per_node
    num_slots = min(ctx.num_devices, per_node)
    size = ctx.num_devices // num_slots
    layer_of = layers(ctx.graph)
    slot_of = _slots(ctx, layer_of, num_slots)
    return {op.name: _block(ctx, op.name, slot_of[layer_of[op.name]], size) for op in ctx.graph.ops}


def expert_strategy(ctx) -> dict[str, Configuration]:
    return rnn_expert_strategy(ctx) if is_recurrent(ctx.graph) else owt_strategy(ctx)


def expert(ctx, options: NoOptions = NoOptions()) -> Plan:
    kind = "rnn (Wu et al.)" if is_recurrent(ctx.graph) else "cnn (one weird trick)"
    return make_plan(ctx, expert_strategy(ctx), "expert", details={"expert": kind})


__all__ = ["expert", "expert_strategy", "is_recurrent", "layers", "rnn_expert_strategy"]
