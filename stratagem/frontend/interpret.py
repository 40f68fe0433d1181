"""The reference interpreter: run an IR graph on real tensors, op by op, in graph order.

Library ops run through `TORCH_OPS[kind](inputs, attrs, out_shape)` with the op's attributes and the
library's defaults for those it leaves out; opaque ops run their recorded ATen call (`calls.py`).
Weights and buffers come from the module (named parameters and buffers, non-persistent buffers and
tied aliases included) or from a state dict; buffers are copied first, so running a graph never
changes the module. Inputs are the forward's arguments, in order (nested ones flattened).

This is the ground truth the runtime and every split are checked against: for a captured module,
`interpret(graph, module, inputs)` equals `module(*inputs)`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from stratagem.errors import StratagemError
from stratagem.frontend.calls import run_call
from stratagem.frontend.precision import cast_floating, recorded_constant, torch_dtype
from stratagem.frontend.torch_ops import TORCH_OPS
from stratagem.ir import Graph, Op, Role
from stratagem.tdl.library import LIBRARY


class InterpretError(StratagemError):
    """A graph the reference interpreter cannot run."""


def missing_kinds(graph: Graph) -> tuple[str, ...]:
    """Op kinds of the graph that have no PyTorch implementation in TORCH_OPS yet."""
    return tuple(sorted({op.kind for op in graph.ops if op.kind != "opaque" and op.kind not in TORCH_OPS}))


def interpret(graph: Graph, weights: torch.nn.Module | Mapping[str, torch.Tensor], inputs: Sequence[Any],
              floating: torch.dtype | None = None) -> tuple[torch.Tensor, ...]:
    """The graph's outputs, computed from `weights` (a module or state dict) and `inputs`;
    `floating` (e.g. torch.float64) evaluates every floating-point tensor in that dtype
    (`precision.py`), the weights and inputs given in it too."""
    missing = missing_kinds(graph)
    if missing:
        raise InterpretError(f"graph {graph.name!r} uses ops with no PyTorch implementation",
                             expected="every op kind in stratagem.frontend.torch_ops.TORCH_OPS",
                             got=", ".join(missing), hint="Add them to TORCH_OPS")
    values = cast_floating({**_parameters(graph, weights, floating), **_inputs(graph, inputs)}, floating)
    with torch.no_grad():
        for op in graph.ops:
            _store(values, op, _run(graph, op, [values[t] for t in op.inputs]), graph, floating)
    return tuple(values[t] for t in graph.outputs)


def _parameters(graph: Graph, weights: torch.nn.Module | Mapping[str, torch.Tensor],
                floating: torch.dtype | None) -> dict[str, torch.Tensor]:
    if isinstance(weights, torch.nn.Module):
        available = {**dict(weights.named_parameters(remove_duplicate=False)),
                     **dict(weights.named_buffers(remove_duplicate=False))}
    else:
        available = dict(weights)
    available.update(_constants(graph, floating))
    found = {}
    for spec in (*graph.tensors_with_role(Role.WEIGHT), *graph.tensors_with_role(Role.BUFFER)):
        if spec.name not in available:
            raise InterpretError(f"no value for {spec.role.value} {spec.name!r}",
                                 expected="a parameter or buffer of that name in the module",
                                 hint="Pass the module that was captured, or its full state dict "
                                      "(constants created in forward have values only when the "
                                      "module was captured on a real device)")
        value = available[spec.name].detach()
        found[spec.name] = value.clone() if spec.role is Role.BUFFER else value
    return found


def _constants(graph: Graph, floating: torch.dtype | None) -> dict[str, torch.Tensor]:
    recorded = graph.meta.get("constants") or {}
    return {name: recorded_constant(c, floating) for name, c in recorded.items()}


def _inputs(graph: Graph, inputs: Sequence[Any]) -> dict[str, torch.Tensor]:
    leaves = [x for x in torch.utils._pytree.tree_leaves(list(inputs)) if isinstance(x, torch.Tensor)]
    names = graph.inputs
    if len(leaves) != len(names):
        raise InterpretError("wrong number of input tensors", expected=f"{len(names)} ({', '.join(names)})",
                             got=str(len(leaves)))
    return dict(zip(names, leaves))


def _run(graph: Graph, op: Op, args: list[torch.Tensor]) -> Any:
    if op.kind == "opaque":
        call = op.attrs.get("call")
        if call is None:
            raise InterpretError(f"opaque op {op.name!r} ({op.attrs['target']}) has no recorded call",
                                 hint="Its ATen call had arguments capture cannot record (see calls.py)")
        return run_call(call, args)
    out_shape = graph.tensors[op.outputs[0]].shape
    return TORCH_OPS[op.kind](args, with_defaults(op), out_shape)


def with_defaults(op: Op) -> dict[str, Any]:
    """The op's attributes, with the library's defaults for those it leaves out."""
    defaults = {p.name: p.default for p in LIBRARY[op.kind].attr_params
                if p.default is not inspect.Parameter.empty}
    return {**defaults, **dict(op.attrs)}


def _store(values: dict[str, torch.Tensor], op: Op, result: Any, graph: Graph,
           floating: torch.dtype | None) -> None:
    """Keep the op's results under its output names, in the dtypes the graph recorded at capture
    (an implementation may promote, e.g. a masked fill with a float value of an int64 tensor),
    floating-point ones in `floating` when given."""
    results = result if isinstance(result, (tuple, list)) else (result,)
    if len(results) != len(op.outputs):
        raise InterpretError(f"op {op.name!r} ({op.kind}) returned {len(results)} tensors",
                             expected=f"{len(op.outputs)}, one per output")
    for name, value in zip(op.outputs, results):
        dtype = torch_dtype(graph.tensors[name].dtype, floating)
        values[name] = value if value.dtype == dtype else value.to(dtype)
