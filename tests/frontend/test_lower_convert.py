"""Capture through aten_map.convert: library ops, chains linked by Intermediate, and the fallback to
opaque when a conversion does not fit. A stand-in converter and two test ops play the library."""

from __future__ import annotations

import warnings
from types import MappingProxyType

import pytest
import torch
from torch import nn

from stratagem.frontend import OpaqueOpsWarning, aten_map, capture, lower
from stratagem.frontend.aten_map import Converted, Intermediate
from stratagem.tdl import graphops, op
from stratagem.tdl.expr import Sum
from stratagem.tdl.library import LIBRARY


@op(weights=("w",))
def matmul_nt(x, w):
    return lambda b, j: Sum(lambda k: x[b, k] * w[j, k])


@op
def add_bias(x, bias):
    return lambda b, j: x[b, j] + bias[j]


@pytest.fixture
def library(monkeypatch):
    extended = MappingProxyType({**LIBRARY, "matmul_nt": matmul_nt, "add_bias": add_bias})
    monkeypatch.setattr(lower, "LIBRARY", extended)
    monkeypatch.setattr(graphops, "LIBRARY", extended)


def linear_as_chain(node):
    if str(node.target) != "aten.linear.default":
        return None
    x, w, b = node.args
    return [Converted("matmul_nt", (x, w), produces=None), Converted("add_bias", (Intermediate(0), b))]


def linear_wrong_shape(node):
    if str(node.target) != "aten.linear.default":
        return None
    x, w, _ = node.args
    return [Converted("matmul_nt", (x, x))]   # [B, K] x [B, K]^T: yields [B, B], not [B, J]


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x).relu().sum()


def capture_with(monkeypatch, converter):
    monkeypatch.setattr(aten_map, "convert", converter)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = capture(Layer(), (torch.randn(4, 3),))
    return graph, [w for w in caught if issubclass(w.category, OpaqueOpsWarning)]


def test_a_chain_becomes_library_ops_linked_by_an_intermediate(monkeypatch, library, checked):
    graph, caught = capture_with(monkeypatch, linear_as_chain)
    checked(graph)
    first, second = (o for o in graph.ops if o.kind in ("matmul_nt", "add_bias"))
    assert (first.kind, second.kind) == ("matmul_nt", "add_bias")
    assert first.inputs == ("x", "fc.weight") and second.inputs == (first.outputs[0], "fc.bias")
    assert graph.tensors[first.outputs[0]].shape == (4, 5)
    assert second.outputs == ("linear",)     # the node's own tensor comes from the last op
    relu = graph.consumers["linear"][0]
    assert relu.kind == "opaque" and relu.attrs["target"] == "aten.relu.default"
    assert "aten.linear.default" not in str(caught[0].message)
    # what autograd keeps for the node is split by who holds it: x and the weight go to the matmul
    assert set(first.saved) == {"x"} and second.saved == ()


def test_sample_dims_reach_library_ops_through_propagation(monkeypatch, library, checked):
    graph, _ = capture_with(monkeypatch, linear_as_chain)
    assert graph.tensors["linear"].sample_dim == 0
    assert graph.tensors[graph.producer["linear"].inputs[0]].sample_dim == 0


def test_a_conversion_that_does_not_fit_falls_back_to_opaque(monkeypatch, library, checked):
    graph, caught = capture_with(monkeypatch, linear_wrong_shape)
    checked(graph)
    linear = graph.producer["linear"]
    assert linear.kind == "opaque" and linear.attrs["target"] == "aten.linear.default"
    text = str(caught[0].message)
    assert "conversion of aten.linear.default refused" in text and "(4, 4)" in text


class _Counted:
    """A library op whose `describe` calls are counted by (kind, shapes)."""

    def __init__(self, kind, inner, calls):
        self.kind, self.inner, self.calls = kind, inner, calls

    def describe(self, *shapes, **attrs):
        self.calls.append((self.kind, shapes))
        return self.inner.describe(*shapes, **attrs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_repeated_layers_ops_are_traced_once(monkeypatch):
    """Ops of equal kind, input shapes, weight roles and attributes share one trace (converters
    give attributes as dicts: the lowering's cache must key them all the same)."""
    calls: list = []
    counted = MappingProxyType({kind: _Counted(kind, inner, calls) for kind, inner in LIBRARY.items()})
    monkeypatch.setattr(lower, "LIBRARY", counted)
    blocks = nn.Sequential(*(nn.Sequential(nn.Linear(6, 6), nn.Softmax(dim=-1)) for _ in range(4)))
    graph = capture(blocks, (torch.randn(3, 6),))
    kinds = [o.kind for o in graph.ops]
    assert kinds.count("linear") == 4 and kinds.count("softmax") == 4
    assert len(calls) == len(set(calls)) and {k for k, _ in calls} >= {"linear", "softmax"}
