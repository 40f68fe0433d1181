"""Structural checks every graph must pass (shape checks against the TDL are in tdl.graphcheck)."""

from __future__ import annotations

from stratagem.errors import GraphError
from stratagem.ir.graph import Graph
from stratagem.ir.tensor import Role


def check_structure(graph: Graph) -> None:
    """Raise GraphError on the first violation: names, producers, order, roles."""
    _check_names(graph)
    _check_single_producer(graph)
    _check_order(graph)
    _check_roles(graph)


def _check_names(graph: Graph) -> None:
    for name, spec in graph.tensors.items():
        if name != spec.name:
            raise GraphError("tensor stored under another name", expected=repr(spec.name), got=repr(name))
        if any(s <= 0 for s in spec.shape):
            raise GraphError(f"tensor {name!r} has an empty dim", expected="all dims >= 1", got=str(spec.shape))
        if spec.sample_dim is not None and not 0 <= spec.sample_dim < spec.rank:
            raise GraphError(f"tensor {name!r} sample_dim out of range",
                             expected=f"0..{spec.rank - 1}", got=str(spec.sample_dim))
    seen: set[str] = set()
    for op in graph.ops:
        if op.name in seen:
            raise GraphError("duplicate op name", expected="unique op names", got=repr(op.name))
        seen.add(op.name)
        for t in (*op.inputs, *op.outputs):
            if t not in graph.tensors:
                raise GraphError(f"op {op.name!r} refers to an unknown tensor", got=repr(t),
                                 hint="Add a TensorSpec for every tensor an op reads or writes")
    for t in graph.outputs:
        if t not in graph.tensors:
            raise GraphError("graph output is not a tensor of the graph", got=repr(t))


def _check_single_producer(graph: Graph) -> None:
    producers: dict[str, str] = {}
    for op in graph.ops:
        for t in op.outputs:
            if t in producers:
                raise GraphError(f"tensor {t!r} is produced twice", expected="one producer",
                                 got=f"{producers[t]!r} and {op.name!r}")
            producers[t] = op.name


def _check_order(graph: Graph) -> None:
    available = {n for n, s in graph.tensors.items() if s.role is not Role.ACTIVATION}
    for op in graph.ops:
        missing = [t for t in op.inputs if t not in available]
        if missing:
            raise GraphError(f"op {op.name!r} reads tensors not yet produced", got=str(missing),
                             hint="Build graphs with Graph.build, which sorts ops topologically")
        available.update(op.outputs)


def _check_roles(graph: Graph) -> None:
    produced = {t for op in graph.ops for t in op.outputs}
    for name, spec in graph.tensors.items():
        if spec.role is Role.ACTIVATION and name not in produced:
            raise GraphError(f"activation {name!r} has no producer",
                             hint="Mark graph inputs with role=input and parameters with role=weight")
        if spec.role is not Role.ACTIVATION and name in produced:
            raise GraphError(f"tensor {name!r} is produced by an op", expected="role activation",
                             got=f"role {spec.role.value}")
