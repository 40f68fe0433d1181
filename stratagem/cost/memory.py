"""Memory of one device under an op's configuration (TensorOpt Eq. 1: m = m_p + m_t).

    parameter_bytes  = sum over the op's own weights and buffers of the local shard (param dtype)
    gradient_bytes   = the local shard of every trainable weight (param dtype)
    optimizer_bytes  = local shard elements x states x the bytes the weight is held in / update shards
                       SGD 0 states, momentum 1, Adam/AdamW 2 (under mixed precision the weight
                       is held in float32 and so are its states: cost.opcost.held_itemsize)
    activation_bytes = the local blocks of the tensors autograd keeps for the op's backward
    temporary_bytes  = transient buffers (re-scheduling intermediates are on the edges)

Which tensors an op keeps (`saved_tensors`): `Op.saved` when capture recorded it; otherwise the
default rule below, from the op's record (its `saves`, declared with the op in the TDL library
after PyTorch's autograd formulas, derivatives.yaml; tdl.trace.SAVES):
  - nothing if no input needs a gradient (nothing to differentiate);
  - nothing for ops whose gradient needs no values (add, sub, neg, cat, every view);
  - the output for ops whose gradient is written in their output (softmax, relu, sigmoid, tanh, exp);
  - every input that is not a weight or buffer (a linear keeps x to form dW = x^T dY;
    its weight is already counted in parameter_bytes), and for some ops (amax, pow) the output too.
A weight belongs to the first op that reads it (ir.ownership.weight_owner); other readers get it over an edge.

Which op outputs share their input's storage (PyTorch views: transpose, permute, expand, squeeze,
slicing, a reshape of a contiguous tensor) is the op's record too (its `view`, tdl.trace.VIEWS):
`viewed_input` says which input a view aliases. A reshape (flatten, unflatten) of a non-contiguous
input copies in PyTorch; an input made by a "strided" view (transpose, permute, expand) is taken as
non-contiguous. The simulator gives a view no buffer of its own (it keeps the buffer it reads alive
for the view's readers); the transient memory (cost.transient) gives it none either.
"""

from __future__ import annotations

from dataclasses import dataclass

from stratagem import values
from stratagem.ir import Graph, Op
from stratagem.ir.ownership import PARAMETER_ROLES
from stratagem.tdl.library import LIBRARY

OPTIMIZER_STATES = {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}


@dataclass(frozen=True)
class MemoryCost:
    parameter_bytes: float
    gradient_bytes: float
    optimizer_bytes: float
    activation_bytes: float
    temporary_bytes: float

    @property
    def total_bytes(self) -> float:
        return (self.parameter_bytes + self.gradient_bytes + self.optimizer_bytes
                + self.activation_bytes + self.temporary_bytes)


@dataclass(frozen=True)
class Optimizer:
    name: str

    def __post_init__(self) -> None:
        values.one_of(self.name, "optimizer", sorted(OPTIMIZER_STATES))

    @property
    def states(self) -> int:
        return OPTIMIZER_STATES[self.name]

    def state_bytes_per_element(self, param_itemsize: int) -> int:
        """States in the dtype the weight is held in (what torch.optim allocates)."""
        return self.states * param_itemsize

    def update_traffic_per_element(self, param_itemsize: int) -> int:
        """Bytes an optimizer step moves per element: read/write param, read grad, read/write states."""
        return 3 * param_itemsize + 2 * self.state_bytes_per_element(param_itemsize)


def kept_tensors(graph: Graph) -> frozenset[str]:
    """Every activation some op keeps for its backward."""
    return frozenset(t for op in graph.ops for t in saved_tensors(graph, op))


def view_of(kind: str) -> str | None:
    """The op kind's view kind (tdl.trace.VIEWS), from its record; None when it is no view."""
    return LIBRARY[kind].view if kind in LIBRARY else None


def viewed_input(graph: Graph, op: Op) -> str | None:
    """The activation `op`'s output is a view of, or None when `op` is not a view of one."""
    view = view_of(op.kind)
    if view is None or len(op.outputs) != 1:
        return None
    data = [t for t in dict.fromkeys(op.inputs) if graph.tensors[t].role not in PARAMETER_ROLES]
    if len(data) != 1 or graph.producer.get(data[0]) is None:
        return None
    if view == "reshape" and view_of(graph.producer[data[0]].kind) == "strided":
        return None
    return data[0]


def keeps_weight_copy(graph: Graph, op: Op, tensor: str) -> bool:
    """Whether `op`, reading weight `tensor` it does not own (a tied or shared weight, over an
    edge from its owner), keeps the copy it receives until its backward, as autograd does for an
    input its gradient formula needs (a linear's weight: dX = dY W). Its owner's resident shard is
    counted in parameter_bytes; a re-scheduled copy is the consumer's own (cost.edgecost)."""
    if op.saved is not None:
        return tensor in op.saved
    saves = LIBRARY[op.kind].saves if op.kind in LIBRARY else "inputs"
    return saves not in ("nothing", "output") and any(t in graph.requires_grad for t in op.inputs)


def keeps_input(graph: Graph, op: Op, tensor: str) -> bool:
    """Whether `op` keeps its copy of input `tensor` (re-scheduled or sliced) until its backward:
    a weight it does not own by `keeps_weight_copy`, anything else when autograd saves it."""
    if graph.tensors[tensor].role in PARAMETER_ROLES:
        return keeps_weight_copy(graph, op, tensor)
    return tensor in saved_tensors(graph, op)


def keeps_copy(graph: Graph, op: Op, tensor: str, option: str | None) -> bool:
    """Whether `op` keeps its copy of input `tensor` under the edge's reuse option: keep_before
    drops the consumer's copy after forward and rebuilds it for backward (TensorOpt's reuse)."""
    return keeps_input(graph, op, tensor) and option != "keep_before"


def saved_tensors(graph: Graph, op: Op) -> tuple[str, ...]:
    """Activations (inputs or outputs of `op`) that autograd keeps for its backward."""
    if op.saved is not None:
        mine = set(op.inputs) | set(op.outputs)
        return tuple(t for t in dict.fromkeys(op.saved)
                     if t in mine and graph.tensors[t].role not in PARAMETER_ROLES)
    saves = LIBRARY[op.kind].saves if op.kind in LIBRARY else "inputs"
    if not any(t in graph.requires_grad for t in op.inputs) or saves == "nothing":
        return ()
    inputs = tuple(t for t in dict.fromkeys(op.inputs) if graph.tensors[t].role not in PARAMETER_ROLES)
    outputs = tuple(t for t in op.outputs if t not in inputs)
    return {"output": outputs, "inputs": inputs}.get(saves, inputs + outputs)
