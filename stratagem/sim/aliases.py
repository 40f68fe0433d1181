"""Which op outputs share their input's storage (PyTorch views), for the simulator's memory.

A view (transpose, permute, expand, squeeze, unsqueeze, slicing, and a reshape of a contiguous
tensor) allocates nothing: its output is the input's buffer under other strides. The simulator
therefore gives a view no buffer of its own and keeps the buffer it reads (the producer's output
shard, or the consumer's re-scheduled copy) alive for the view's readers too:

    users(buffer) = its own readers  U  users(output of every view that aliases it)

Which ops are views, and of which kind, is the op's record (its `view`, declared with the op in
the TDL library, tdl.trace.VIEWS). A reshape (flatten, unflatten) of a non-contiguous input copies
in PyTorch; the simulator takes an input made by a "strided" view (transpose, permute, expand) as
non-contiguous. A view whose input is sliced locally
(the consumer reads a sub-block of the producer's shard) keeps a buffer of its own, as before.
"""

from __future__ import annotations

from stratagem.ir import Graph, Op, Role
from stratagem.tdl.library import LIBRARY

def view_of(kind: str) -> str | None:
    """The op kind's view kind (tdl.trace.VIEWS), from its record; None when it is no view."""
    return LIBRARY[kind].view if kind in LIBRARY else None


def viewed_input(graph: Graph, op: Op) -> str | None:
    """The activation `op`'s output is a view of, or None when `op` is not a view of one."""
    view = view_of(op.kind)
    if view is None or len(op.outputs) != 1:
        return None
    data = [t for t in dict.fromkeys(op.inputs) if graph.tensors[t].role not in (Role.WEIGHT, Role.BUFFER)]
    if len(data) != 1 or graph.producer.get(data[0]) is None:
        return None
    if view == "reshape" and view_of(graph.producer[data[0]].kind) == "strided":
        return None
    return data[0]
