"""Memory of one device under an op's configuration (TensorOpt Eq. 1: m = m_p + m_t).

    parameter_bytes  = sum over the op's own weights and buffers of the local shard (param dtype)
    gradient_bytes   = the local shard of every trainable weight (param dtype)
    optimizer_bytes  = local shard elements x (states x state bytes + master bytes) / update shards
                       SGD 0 states, momentum 1, Adam/AdamW 2; states in fp32 under mixed precision
                       (plus a 4-byte fp32 master copy), in the param dtype otherwise
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
    mixed_precision: bool = False

    def __post_init__(self) -> None:
        values.one_of(self.name, "optimizer", sorted(OPTIMIZER_STATES))

    @property
    def states(self) -> int:
        return OPTIMIZER_STATES[self.name]

    def state_bytes_per_element(self, param_itemsize: int) -> int:
        state_itemsize = 4 if self.mixed_precision else param_itemsize
        return self.states * state_itemsize + (4 if self.mixed_precision else 0)

    def update_traffic_per_element(self, param_itemsize: int) -> int:
        """Bytes an optimizer step moves per element: read/write param, read grad, read/write states."""
        return 3 * param_itemsize + 2 * self.state_bytes_per_element(param_itemsize)


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
