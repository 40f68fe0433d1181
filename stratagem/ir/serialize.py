"""Graphs as plain JSON-able dicts (plans embed the graph they were made for)."""

from __future__ import annotations

from typing import Any

from stratagem.errors import GraphError
from stratagem.ir.attrs import Attrs
from stratagem.ir.graph import Graph, Op
from stratagem.ir.tensor import TensorSpec


def graph_to_dict(graph: Graph) -> dict[str, Any]:
    return {
        "name": graph.name,
        "tensors": [[s.name, list(s.shape), s.dtype, s.role.value, s.sample_dim]
                    for s in graph.tensors.values()],
        "ops": [_op_to_dict(op) for op in graph.ops],
        "outputs": list(graph.outputs),
        "meta": graph.meta.to_json(),
    }


def _op_to_dict(op: Op) -> dict[str, Any]:
    out: dict[str, Any] = {"name": op.name, "kind": op.kind, "inputs": list(op.inputs),
                           "outputs": list(op.outputs)}
    if op.attrs:
        out["attrs"] = op.attrs.to_json()
    if op.module:
        out["module"] = op.module
    if op.saved is not None:
        out["saved"] = list(op.saved)
    return out


def graph_from_dict(data: dict[str, Any]) -> Graph:
    try:
        tensors = [TensorSpec(n, tuple(shape), dtype, role, sample_dim)
                   for n, shape, dtype, role, sample_dim in data["tensors"]]
        ops = [Op(o["name"], o["kind"], tuple(o["inputs"]), tuple(o["outputs"]), Attrs(o.get("attrs", {})),
                  o.get("module", ""), tuple(o["saved"]) if "saved" in o else None) for o in data["ops"]]
        return Graph.build(data["name"], tensors, ops, data["outputs"], data.get("meta", {}))
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise GraphError("graph record is malformed", expected="tensors, ops and outputs as written "
                         "by graph_to_dict", got=f"{type(error).__name__}: {error}") from error
