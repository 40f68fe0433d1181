"""The reference interpreter: captured graphs compute what their modules compute."""

from __future__ import annotations

import warnings
from types import MappingProxyType

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from stratagem.frontend import capture
from stratagem.frontend import interpret as interpret_module
from stratagem.frontend.interpret import InterpretError, interpret, missing_kinds
from stratagem.frontend.precision import cast_floating
from stratagem.ir import Graph, Op, Role, TensorSpec
from stratagem.tdl import op
from stratagem.tdl.library import LIBRARY
from stratagem.tdl.rounding import same_math_rtol

pytestmark = pytest.mark.numerics     # run under every kernel path by scripts/numerics_variants.sh


class Mixed(nn.Module):
    """Convolution, batch norm, pooling, an LSTM cell, attention, tied weights, dropout off."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.embed = nn.Embedding(10, 8)
        self.cell = nn.LSTMCell(8, 8)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 10)
        self.head.weight = self.embed.weight

    def forward(self, images: torch.Tensor, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        features = F.max_pool2d(F.relu(self.bn(self.conv(images))), 2).flatten(1)[:, :8]
        h = c = features.new_zeros(features.shape)
        for t in range(ids.shape[1]):
            h, c = self.cell(self.embed(ids[:, t]), (h, c))
        q = self.norm(h + features).view(-1, 2, 1, 4)
        attended = F.scaled_dot_product_attention(q, q, q, is_causal=True).reshape(-1, 8)
        return F.cross_entropy(self.head(attended), labels)


def test_a_captured_graph_computes_the_module_loss(checked):
    torch.manual_seed(0)
    model = Mixed()
    inputs = (torch.randn(3, 3, 8, 8), torch.randint(10, (3, 4)), torch.randint(10, (3,)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = checked(capture(model, inputs))
    model, inputs = model.double(), cast_floating(inputs, torch.float64)
    expected = model(*inputs)
    before = model.bn.running_mean.clone()
    (got,) = interpret(graph, model, inputs, torch.float64)
    torch.testing.assert_close(got, expected.detach(), atol=0, rtol=same_math_rtol(graph, "float64"))
    assert torch.equal(model.bn.running_mean, before)   # buffers are copied, never written


def test_a_state_dict_serves_as_well_as_the_module(checked):
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh())
    x = torch.randn(2, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = checked(capture(model, (x,)))
    (got,) = interpret(graph, model.state_dict(), (x,))
    assert torch.equal(got, model(x).detach())      # the same kernels on the same values


@op
def scale(x, *, factor=2.0):
    return lambda i: x[i] * factor


def scale_graph(attrs) -> Graph:
    return Graph.build("scaled", [TensorSpec("x", (3,), role=Role.INPUT), TensorSpec("y", (3,))],
                       [Op("s", "scale", ("x",), ("y",), attrs)], ["y"])


def test_library_ops_run_through_torch_ops_with_defaults_filled(monkeypatch):
    monkeypatch.setattr(interpret_module, "LIBRARY", MappingProxyType({**LIBRARY, "scale": scale}))
    seen = {}

    def scale_impl(inputs, attrs, out_shape):
        seen.update(attrs=dict(attrs), out_shape=out_shape)
        return inputs[0] * attrs["factor"]

    monkeypatch.setattr(interpret_module, "TORCH_OPS", MappingProxyType({"scale": scale_impl}))
    x = torch.tensor([1.0, 2.0, 3.0])
    assert missing_kinds(scale_graph({})) == ()
    (y,) = interpret(scale_graph({}), {}, (x,))
    assert torch.equal(y, 2 * x) and seen == {"attrs": {"factor": 2.0}, "out_shape": (3,)}
    (y,) = interpret(scale_graph({"factor": 5.0}), {}, (x,))
    assert torch.equal(y, 5 * x)


def test_kinds_without_an_implementation_are_named(monkeypatch):
    monkeypatch.setattr(interpret_module, "TORCH_OPS", MappingProxyType({}))
    assert missing_kinds(scale_graph({})) == ("scale",)
    with pytest.raises(InterpretError, match="scale"):
        interpret(scale_graph({}), {}, (torch.zeros(3),))


def test_missing_weights_and_wrong_inputs_are_reported():
    torch.manual_seed(2)
    model = nn.Linear(4, 3)
    x = torch.randn(2, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = capture(model, (x,))
    with pytest.raises(InterpretError, match="'weight'"):
        interpret(graph, {"bias": model.bias}, (x,))
    with pytest.raises(InterpretError, match="1 \\(input\\)"):
        interpret(graph, model, (x, x))
