"""Memory of one device under an op's configuration (TensorOpt Eq. 1: m = m_p + m_t).

    parameter_bytes  = sum over the op's own weights and buffers of the local shard (param dtype)
    gradient_bytes   = the local shard of every trainable weight (param dtype)
    optimizer_bytes  = local shard elements x states x the bytes the weight is held in / update shards
                       SGD 0 states, momentum 1, Adam/AdamW 2 (under mixed precision the weight
                       is held in float32 and so are its states: cost.opcost.held_itemsize)
    activation_bytes = the local blocks of the tensors autograd keeps for the op's backward, and
                       what its kernel keeps besides them (kept_inside_bytes)
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
Capture records no `saved` for an op whose record says the runtime runs one fused kernel keeping
what `saves` says (`fused_saves`: attention), where capture traced a decomposed reference.
What a kernel keeps that is neither an input nor the output (`kept_inside_bytes`: cross-entropy's
log-probabilities, RMSNorm's normalized input) is the record's `keeps_inside` (multiples of its
first input's local bytes, some only when an optional input is given), kept from its forward
until its backward as the saved tensors are.

Which op outputs share their input's storage (PyTorch views: transpose, permute, expand, squeeze,
slicing, a reshape of a contiguous tensor) is the op's record too (its `view`, tdl.trace.VIEWS):
`viewed_input` says which input a view aliases. A reshape (flatten, unflatten) of a non-contiguous
input copies in PyTorch; an input made by a "strided" view (transpose, permute, expand) is taken as
non-contiguous, unless it undoes its input's own order (`memory_order`: a decoder's attention
output lies as its transposed query, [B, L, H, E], and transposing it back is contiguous). The
simulator gives a view no buffer of its own (it keeps the buffer it reads alive for the view's
readers); the transient memory (cost.transient) gives it none either.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from stratagem import values
from stratagem.ir import Graph, Op, dtype_bytes
from stratagem.ir.ownership import PARAMETER_ROLES
from stratagem.tdl.graphops import AnalysisCache, analyze_op
from stratagem.tdl.library import LIBRARY

OPTIMIZER_STATES = {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}


@dataclass(frozen=True)
class MemoryCost:
    parameter_bytes: float
    gradient_bytes: float
    optimizer_bytes: float
    activation_bytes: float
    temporary_bytes: float
    kept_inside_bytes: float = 0.0   # of activation_bytes: what the kernel keeps that is neither
                                     # an input nor the output (`kept_inside_bytes` below)
    host_bytes: float = 0.0          # weight, gradient and optimizer state held in host memory
                                     # ("offloaded" weight state), none of the device's total
    offloaded_bytes: float = 0.0     # activations in host memory from forward to backward
                                     # (cost.activation_offload), none of the device's total

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


def viewed_input(graph: Graph, op: Op, analyses: AnalysisCache | None = None) -> str | None:
    """The activation `op`'s output is a view of, or None when `op` is not a view of one
    (`analyses`: the graph's, to analyse each op once; CostModel.viewed_inputs keeps them all)."""
    view = view_of(op.kind)
    if view is None or len(op.outputs) != 1:
        return None
    data = [t for t in dict.fromkeys(op.inputs) if graph.tensors[t].role not in PARAMETER_ROLES]
    if len(data) != 1 or graph.producer.get(data[0]) is None:
        return None
    if view == "reshape" and not is_contiguous(graph, data[0], analyses):
        return None
    return data[0]


def is_contiguous(graph: Graph, tensor: str, analyses: AnalysisCache | None = None) -> bool:
    """Whether `tensor` lies row-major in memory (`memory_order`)."""
    return memory_order(graph, tensor, analyses) == tuple(range(len(graph.tensors[tensor].shape)))


def memory_order(graph: Graph, tensor: str, analyses: AnalysisCache | None = None) -> tuple[int, ...] | None:
    """`tensor`'s dims from outermost to innermost in memory (None: strided in some other way).
    Row-major unless its producer says otherwise: a transpose swaps the two dims in its input's
    order; an elementwise op of an input of its own shape, or a kernel whose record says
    `output_like_input` (fused attention), lays its output out as that input lies; another
    strided view (permute, expand) is not row-major."""
    rank = len(graph.tensors[tensor].shape)
    producer = graph.producer.get(tensor)
    if producer is None or producer.kind not in LIBRARY or not producer.inputs:
        return tuple(range(rank))
    source = producer.inputs[0]
    if producer.kind == "transpose":
        order = memory_order(graph, source, analyses)
        a, b = int(producer.attrs["dim0"]) % rank, int(producer.attrs["dim1"]) % rank
        return None if order is None else tuple(b if d == a else a if d == b else d for d in order)
    if view_of(producer.kind) == "strided":
        return None
    if graph.tensors[source].shape == graph.tensors[tensor].shape and (
            LIBRARY[producer.kind].output_like_input or _elementwise(graph, producer, analyses)):
        return memory_order(graph, source, analyses)
    return tuple(range(rank))


def _elementwise(graph: Graph, op: Op, analyses: AnalysisCache | None) -> bool:
    return (analyses[op.name] if analyses is not None else analyze_op(graph, op)).is_elementwise


def kept_inside_bytes(graph: Graph, op: Op, first_input_local_elements: float,
                      fused_kernels: Collection[str] = ()) -> float:
    """Bytes `op`'s kernel keeps for backward beyond its saved inputs and outputs (the record's
    `keeps_inside` x its first input's local bytes); none when no input needs a gradient, or when
    the device runs its kind as a fused kernel that keeps nothing more (`fused_kernels`: the
    device's DeviceSpec.fused_kernels)."""
    record = LIBRARY.get(op.kind)
    if record is None or not record.keeps_inside or not op.inputs or op.kind in fused_kernels:
        return 0.0
    if not any(t in graph.requires_grad for t in op.inputs):
        return 0.0
    multiple = sum(m for m, given in record.keeps_inside if given is None or _given(record, op, given))
    return multiple * first_input_local_elements * dtype_bytes(graph.tensors[op.inputs[0]].dtype)


def check_fused_kernels(kinds: Collection[str]) -> None:
    """A device's `fused_kernels` name op kinds of the library that keep something inside."""
    unknown = [k for k in kinds if k not in LIBRARY or not LIBRARY[k].keeps_inside]
    if unknown:
        raise values.invalid("device.fused_kernels", "op kinds whose records keep something inside their kernel "
                             f"({', '.join(k for k, r in sorted(LIBRARY.items()) if r.keeps_inside)})",
                             ", ".join(unknown), hint="Remove them from the cluster file's device.fused_kernels")


def _given(record, op: Op, parameter: str) -> bool:
    """Whether `op` reads the record's tensor parameter `parameter` (trailing optional inputs
    left out are absent from op.inputs)."""
    names = [p.name for p in record.tensor_params]
    return parameter in names and names.index(parameter) < len(op.inputs)


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
