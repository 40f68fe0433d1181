"""Readable text form of a graph, one op per line."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:                       # graph.py imports this module to print itself
    from stratagem.ir.graph import Graph


def format_graph(graph: "Graph", max_ops: int | None = None) -> str:
    lines = [f"graph {graph.name}: {len(graph.ops)} ops, {graph.num_parameters:,} parameters"]
    for spec in graph.tensors.values():
        if spec.role.value in ("input", "weight", "buffer"):
            lines.append(f"  {spec.role.value:8s} {spec}")
    shown = graph.ops if max_ops is None else graph.ops[:max_ops]
    for op in shown:
        outs = ", ".join(str(graph.tensors[t]) for t in op.outputs)
        attrs = "" if not op.attrs else " {" + ", ".join(f"{k}={v}" for k, v in op.attrs.items()) + "}"
        lines.append(f"  {outs} = {op.kind}({', '.join(op.inputs)}){attrs}")
    if max_ops is not None and len(graph.ops) > max_ops:
        lines.append(f"  ... {len(graph.ops) - max_ops} more ops")
    lines.append(f"  outputs: {', '.join(graph.outputs)}")
    return "\n".join(lines)
