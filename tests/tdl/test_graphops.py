"""Sample dims propagated along a graph (tdl.graphops): each distinct analysis found once, the
dims as analyzing every op on its own gives them."""

from __future__ import annotations

from dataclasses import replace

from stratagem.ir import Graph
from stratagem.tdl import graphops
from stratagem.tdl.graphops import analysis_key, analyze_op, propagate_sample_dims
from tests.search.graphs import chain


def _without_sample_dims(graph: Graph) -> Graph:
    inputs = {t for t in graph.tensors if t not in graph.producer}
    tensors = {name: spec if name in inputs else replace(spec, sample_dim=None)
               for name, spec in graph.tensors.items()}
    return Graph(graph.name, tensors, graph.ops, graph.outputs, graph.meta)


def _one_by_one(graph: Graph) -> dict:
    tensors = dict(graph.tensors)
    for op in graph.ops:
        analysis = analyze_op(Graph(graph.name, tensors, graph.ops, graph.outputs, graph.meta), op)
        sample = [i for i, d in enumerate(analysis.output_dims) if d.kind == "sample"]
        for t in op.outputs:
            if tensors[t].sample_dim is None and sample:
                tensors[t] = replace(tensors[t], sample_dim=sample[0])
    return {name: spec.sample_dim for name, spec in tensors.items()}


def test_identical_layers_are_analyzed_once_and_get_the_dims_of_one_by_one(monkeypatch):
    graph = _without_sample_dims(chain(layers=6))
    expected = _one_by_one(graph)
    calls = []

    def counted(g, op):
        calls.append(analysis_key(g, op))
        return analyze_op(g, op)

    monkeypatch.setattr(graphops, "analyze_op", counted)
    found = propagate_sample_dims(graph)
    assert {name: spec.sample_dim for name, spec in found.tensors.items()} == expected
    assert any(d is not None for name, d in expected.items() if name in graph.producer)
    assert len(calls) == len(set(calls)) < len(graph.ops)
