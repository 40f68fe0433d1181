"""Which op outputs share their input's storage (PyTorch views), for the simulator's memory.

A view (transpose, permute, expand, squeeze, unsqueeze, slicing, and a reshape of a contiguous
tensor) allocates nothing: its output is the input's buffer under other strides. The simulator
therefore gives a view no buffer of its own and keeps the buffer it reads (the producer's output
shard, or the consumer's re-scheduled copy) alive for the view's readers too:

    users(buffer) = its own readers  U  users(output of every view that aliases it)

A reshape (flatten, unflatten) of a non-contiguous input copies in PyTorch; the simulator takes an
input made by transpose, permute or expand as non-contiguous. A view whose input is sliced locally
(the consumer reads a sub-block of the producer's shard) keeps a buffer of its own, as before.
"""

from __future__ import annotations

from stratagem.ir import Graph, Op, Role

VIEW_KINDS = frozenset({"reshape", "view", "flatten", "unflatten", "squeeze", "unsqueeze", "expand",
                        "transpose", "permute", "slice", "select", "narrow", "diagonal", "as_strided",
                        "identity", "alias", "detach"})
RESHAPE_KINDS = frozenset({"reshape", "view", "flatten", "unflatten"})
STRIDED_KINDS = frozenset({"transpose", "permute", "expand", "diagonal", "as_strided"})


def viewed_input(graph: Graph, op: Op) -> str | None:
    """The activation `op`'s output is a view of, or None when `op` is not a view of one."""
    if op.kind not in VIEW_KINDS or len(op.outputs) != 1:
        return None
    data = [t for t in dict.fromkeys(op.inputs) if graph.tensors[t].role not in (Role.WEIGHT, Role.BUFFER)]
    if len(data) != 1 or graph.producer.get(data[0]) is None:
        return None
    if op.kind in RESHAPE_KINDS and graph.producer[data[0]].kind in STRIDED_KINDS:
        return None
    return data[0]
