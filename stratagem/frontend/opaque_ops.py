"""Opaque ops: ATen calls the TDL cannot describe, planned as batch-sliced or replicated.

An opaque op is split only along the batch: its output's batch dim (detected by `batchdims.py`)
slices every input that has one, and inputs without one are read whole. With no output batch dim it
is replicated. An op that combines values along a `dim` argument (softmax, cumsum, sort, flip, ...)
is never split when that dim is the batch. Batch norm in training mode is split as data
parallelism splits it, with per-device batch statistics.

The op's `call` attribute records the ATen call (`calls.py`), with in-place targets replaced by
their out-of-place variants, so the reference interpreter (and the runtime, on local shards, after
substituting the local output shape for any size argument equal to `out_shape`) can run it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch import fx

from stratagem.frontend import calls
from stratagem.frontend.fxnodes import dtype_name, module_path
from stratagem.ir import Op, Role, TensorSpec

if TYPE_CHECKING:
    from stratagem.frontend.lower import Lowering

# ATen ops that combine values along their `dim` / `dims` argument.
MIXING_ARGUMENT = {
    "softmax": "dim", "_softmax": "dim", "log_softmax": "dim", "_log_softmax": "dim",
    "cumsum": "dim", "cumprod": "dim", "logcumsumexp": "dim", "sort": "dim", "argsort": "dim",
    "topk": "dim", "diff": "dim", "flip": "dims", "roll": "dims",
}


def opaque_op(lowering: "Lowering", node: fx.Node, target: str, value_node: fx.Node,
              index: int | None) -> tuple[Op, TensorSpec]:
    """The opaque op yielding `value_node`'s tensor (element `index` of `node`'s tuple, if any)."""
    tensor_args = _tensor_args(lowering, node)
    inputs = tuple(dict.fromkeys(lowering.tensor_name(a) for a in tensor_args))
    val = value_node.meta["val"]
    out_dim = lowering.batch_dims.get(value_node.name)
    if out_dim is not None and _mixes_along_batch(lowering, node, tensor_args):
        out_dim = None
    out_batch = val.shape[out_dim] if out_dim is not None else None
    in_dims = tuple(_input_batch_dim(lowering.specs[name], out_batch) for name in inputs)
    name = value_node.name
    attrs = {"target": target, "out_shape": tuple(val.shape), "in_sample_dims": in_dims,
             "out_sample_dim": out_dim, "call": _call(lowering, node, inputs, index)}
    op = Op(name, "opaque", inputs, (name,), attrs, module_path(node))
    spec = TensorSpec(name, tuple(val.shape), dtype_name(val.dtype),
                      Role.ACTIVATION, out_dim)
    return op, spec


def _batch_dim(spec: TensorSpec) -> int | None:
    return spec.sample_dim if spec.role in (Role.INPUT, Role.ACTIVATION) else None


def _input_batch_dim(spec: TensorSpec, out_batch: int | None) -> int | None:
    """An input is sliced with the output's samples only if it has as many (inputs of another
    batch size are read whole)."""
    dim = _batch_dim(spec)
    if dim is None or out_batch is None or spec.shape[dim] == out_batch:
        return dim
    return None


def _tensor_args(lowering: "Lowering", node: fx.Node) -> list[fx.Node]:
    found: list[fx.Node] = []
    fx.node.map_arg((node.args, node.kwargs), lambda n: found.append(n) if lowering.is_tensor(n) else n)
    return found


def _call(lowering: "Lowering", node: fx.Node, inputs: tuple[str, ...], index: int | None) -> Any:
    position = {name: i for i, name in enumerate(inputs)}

    def constant(n: fx.Node) -> Any:
        return n if lowering.is_tensor(n) else lowering.constants.get(n.name, n)

    def tensor_index(a: Any) -> int | None:
        return position[lowering.tensor_name(a)] if lowering.is_tensor(a) else None

    args = fx.node.map_arg(node.args, constant)
    kwargs = fx.node.map_arg(node.kwargs, constant)
    return calls.encode_call(calls.functional_target(node.target), args, kwargs, tensor_index, index)


def _mixes_along_batch(lowering: "Lowering", node: fx.Node, tensor_args: list[fx.Node]) -> bool:
    argument = MIXING_ARGUMENT.get(getattr(node.target, "_opname", ""))
    if argument is None or not tensor_args:
        return False
    spec = lowering.specs[lowering.tensor_name(tensor_args[0])]
    batch = _batch_dim(spec)
    if batch is None:
        return False
    normalized = node.normalized_arguments(lowering.program.graph_module,
                                           normalize_to_only_use_kwargs=True)
    dims = normalized.kwargs.get(argument, -1) if normalized else -1
    dims = dims if isinstance(dims, (list, tuple)) else [dims]
    return any(d % max(spec.rank, 1) == batch for d in dims)
