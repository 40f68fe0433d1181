"""The TDL applied to a graph: each op analyzed in context, and the graph checked against it.

In a graph, which inputs are weights comes from tensor roles (weights and buffers), and which dim
of each input is the batch comes from `TensorSpec.sample_dim`; so the same library op (a matmul)
can be `parameter`-split in one place and not in another. Analyses are cached by everything they
depend on: (kind, input shapes, attrs, weight flags, sample dims).
"""

from __future__ import annotations

from dataclasses import replace

from stratagem.errors import GraphError, StratagemError
from stratagem.ir import PARAMETER_ROLES, Graph, Op, check_structure
from stratagem.tdl.analysis import Analysis
from stratagem.tdl.library import LIBRARY


def analysis_key(graph: Graph, op: Op) -> tuple:
    specs = [graph.tensors[t] for t in op.inputs]
    return (op.kind, tuple(s.shape for s in specs), op.attrs,
            tuple(s.role in PARAMETER_ROLES for s in specs), tuple(s.sample_dim for s in specs))


def analyze_op(graph: Graph, op: Op) -> Analysis:
    """Analyze `op` with the shapes, weights and batch dims its graph gives it."""
    if op.kind not in LIBRARY:
        raise GraphError(f"op {op.name!r} has kind {op.kind!r}, which the TDL library lacks",
                         hint="Capture maps unknown ATen ops to kind 'opaque'; run `stratagem ops`")
    specs = [graph.tensors[t] for t in op.inputs]
    try:
        desc = LIBRARY[op.kind].describe(*(s.shape for s in specs),
                                         weights=[s.role in PARAMETER_ROLES for s in specs],
                                         **dict(op.attrs))
    except StratagemError as error:
        raise GraphError(f"op {op.name!r} ({op.kind}) does not fit its description: {error}") from error
    return Analysis(desc, [s.sample_dim for s in specs])


class AnalysisCache:
    """Analyses of a graph's ops, shared by every op with the same signature."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self._by_key: dict[tuple, Analysis] = {}
        self._by_op: dict[str, Analysis] = {}

    def __getitem__(self, op_name: str) -> Analysis:
        if op_name not in self._by_op:
            op = self.graph.op(op_name)
            key = analysis_key(self.graph, op)
            if key not in self._by_key:
                self._by_key[key] = analyze_op(self.graph, op)
            self._by_op[op_name] = self._by_key[key]
        return self._by_op[op_name]

    @property
    def num_distinct(self) -> int:
        return len(self._by_key)


def check_graph(graph: Graph, cache: AnalysisCache | None = None) -> None:
    """Structural checks, then every op against its TDL description (shapes and arity)."""
    check_structure(graph)
    cache = cache or AnalysisCache(graph)
    for op in graph.ops:
        analysis = cache[op.name]
        if len(op.outputs) != analysis.desc.num_outputs:
            raise GraphError(f"op {op.name!r} ({op.kind}) has {len(op.outputs)} outputs",
                             expected=f"{analysis.desc.num_outputs} as its description says")
        for t in op.outputs:
            if graph.tensors[t].shape != analysis.output_shape:
                raise GraphError(f"op {op.name!r} ({op.kind}) output {t!r} has the wrong shape",
                                 expected=str(analysis.output_shape), got=str(graph.tensors[t].shape))


def propagate_sample_dims(graph: Graph) -> Graph:
    """Give every activation the sample dim its producer's analysis implies (dims of kind sample)."""
    tensors = dict(graph.tensors)
    found: dict[tuple, Analysis] = {}          # by analysis_key, as AnalysisCache shares them
    for op in graph.ops:
        partial = Graph(graph.name, tensors, graph.ops, graph.outputs, graph.meta)
        key = analysis_key(partial, op)
        analysis = found.get(key)
        if analysis is None:
            analysis = found[key] = analyze_op(partial, op)
        sample = [i for i, d in enumerate(analysis.output_dims) if d.kind == "sample"]
        for t in op.outputs:
            if tensors[t].sample_dim is None and sample:
                tensors[t] = replace(tensors[t], sample_dim=sample[0])
    return Graph(graph.name, tensors, graph.ops, graph.outputs, graph.meta)
