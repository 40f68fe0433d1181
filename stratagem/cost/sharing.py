"""Buffers that several consumers keep for backward: one tensor its producer does not keep.

A tensor t whose producer p does not keep it for its backward, read by consumers c_1..c_m that do
(the q, k and v projections reading a norm's output): each c_i that reads t as p lays it out (no
copy, no slice: `reads_as_is`) keeps p's buffer alive until its backward, and the others keep
their own copies. What t holds until backward on p's devices is

    |t|_p * [j >= 1] + (the copies, priced on their edges),    j = the c_i reading t as it is.

Priced edge by edge (TensorOpt Eq. 2, cost.edgecost), each c_i reading t as it is is charged
|t|_p as its own kept activation (cost.opcost), so a strategy with j >= 2 such readers is charged
(j - 1) |t|_p too much. Two exact ways to count it:

  - given the whole strategy: `sharing_credits` gives (j - 1) |t|_p back on p's devices;
  - edge by edge, for Frontier Tracking: a flag per such tensor on its producer (search.space).
    f = 0: every reader as it is pays |t|_p (exact for j <= 1); f = 1: the producer pays |t|_p and
    every reader as it is pays nothing (exact for j >= 1). Both flags only ever overcharge, and for
    every j one of them is exact, so the least over f (which FT takes, the flag changing memory only)
    is exact. `SharedTensor.producer_bytes` and `reader_credit` are the two terms.
The simulator holds one buffer as the runtime does (sim.lifetimes: `_backward_sharers`); a
producer's buffer kept this way is not transient (cost.transient asks `kept_producer_buffers`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from stratagem.cost.memory import saved_tensors
from stratagem.ir import Graph, dtype_bytes
from stratagem.space import Configuration, Edge


@dataclass(frozen=True)
class SharedTensor:
    tensor: str
    producer: str
    keepers: tuple[str, ...]          # consumers that keep it for backward (two or more)


def shared_tensors(graph: Graph) -> tuple[SharedTensor, ...]:
    """Every activation its producer does not keep and two or more of its consumers do."""
    found = []
    for op in graph.ops:
        mine = set(saved_tensors(graph, op))
        for t in op.outputs:
            if t in mine:
                continue
            keepers = tuple(dict.fromkeys(c.name for c in graph.consumers.get(t, ())
                                          if t in saved_tensors(graph, c)))
            if len(keepers) >= 2:
                found.append(SharedTensor(t, op.name, keepers))
    return tuple(found)


def reads_as_is(model, edge: Edge, src_config: Configuration, dst_config: Configuration) -> bool:
    """The consumer reads the producer's buffer itself: its layout, no copy, no slice."""
    src = model.layouts.output_layout(edge.src_op, src_config)
    consumer = model.graph.op(edge.dst_op)
    positions = [i for i, t in enumerate(consumer.inputs) if t == edge.tensor]
    return all(model.input_layout(edge.dst_op, dst_config, i) == src for i in positions)


def producer_bytes(model, shared: SharedTensor, config: Configuration) -> float:
    """|t|_p: the producer's buffer of the tensor, per device of its configuration."""
    spec = model.graph.tensors[shared.tensor]
    local = model.layouts.output_layout(shared.producer, config).local_num_elements(spec.shape)
    return float(local * dtype_bytes(spec.dtype))


def kept_producer_buffers(model, strategy: Mapping[str, Configuration]) -> frozenset[str]:
    """The shared tensors whose producer's buffer some consumer keeps, reading it as it is."""
    return frozenset(s.tensor for s, readers in _readers_as_is(model, strategy) if readers)


def sharing_credits(model, strategy: Mapping[str, Configuration]) -> Iterator[tuple[float, tuple[int, ...]]]:
    """(bytes given back, the devices) per shared tensor read as it is by j >= 2 keepers."""
    for num_bytes, devices, _ in credited_readers(model, strategy):
        yield num_bytes, devices


def credited_readers(model, strategy: Mapping[str, Configuration]
                     ) -> Iterator[tuple[float, tuple[int, ...], tuple[str, ...]]]:
    """`sharing_credits` with the keepers that read each shared tensor as it is."""
    for shared, readers in _readers_as_is(model, strategy):
        if len(readers) >= 2:
            config = strategy[shared.producer]
            yield (len(readers) - 1) * producer_bytes(model, shared, config), config.devices, tuple(readers)


def _readers_as_is(model, strategy):
    src_of = {s.tensor: s for s in model.shared_tensors}
    for shared in src_of.values():
        src = strategy[shared.producer]
        readers = [q for q in shared.keepers
                   if reads_as_is(model, Edge(shared.tensor, shared.producer, q), src, strategy[q])]
        yield shared, readers


__all__ = ["SharedTensor", "credited_readers", "kept_producer_buffers", "producer_bytes", "reads_as_is", "shared_tensors",
           "sharing_credits"]
