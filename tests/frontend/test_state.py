"""Forwards that write their module's state: buffers carried as state (the IR computes each one's
next value and graph.meta["state_updates"] names it), parameters refused, and writes capture
cannot carry refused naming the op and the buffer."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from stratagem.frontend import capture
from stratagem.frontend.interpret import interpret
from stratagem.frontend.export import ExportFailed
from stratagem.frontend.state import StateWriteError, refuse_uncarried


def _capture(module, *inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return capture(module, inputs)


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.register_buffer("average", torch.zeros(4))

    def forward(self, x):
        self.steps += 1
        y = self.linear(x)
        with torch.no_grad():
            self.average.mul_(0.9).add_(y.mean(0) * 0.1)
        return y.sum()


def test_hand_kept_counters_and_averages_are_carried_as_state():
    graph = _capture(Counter(), torch.randn(3, 4))
    updates = graph.meta["state_updates"]
    assert set(updates) == {"steps", "average"}
    producers = {out: op for op in graph.ops for out in op.outputs}
    assert producers[updates["steps"]].kind == "add_scalar"
    assert "mean" in {op.kind for op in graph.ops}          # the average's new value is computed


def test_batch_norm_running_statistics_are_carried_as_the_module_computes_them():
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(3).double()
    x = torch.randn(4, 3, 5, 5, dtype=torch.float64)
    graph = _capture(bn, x)
    updates = graph.meta["state_updates"]
    assert set(updates) == {"running_mean", "running_var", "num_batches_tracked"}
    kinds = {op.outputs[0]: op.kind for op in graph.ops}
    assert kinds[updates["running_mean"]] == kinds[updates["running_var"]] == "batch_norm_running"
    before = {n: b.clone() for n, b in bn.named_buffers()}
    expected = bn(x)                                   # eager: writes the buffers
    values = _values_of(graph, {**before, "weight": bn.weight, "bias": bn.bias}, x)
    assert torch.allclose(values[graph.outputs[0]], expected)
    for buffer, tensor in updates.items():
        assert torch.allclose(values[tensor].to(getattr(bn, buffer).dtype), getattr(bn, buffer), rtol=1e-12, atol=0)


def _values_of(graph, weights, *inputs):
    """Every tensor of the graph, by the reference interpreter on a graph whose outputs are all
    of them (the state updates are no outputs of the captured graph)."""
    from stratagem.ir import Graph
    everything = Graph.build(graph.name, tuple(graph.tensors.values()), graph.ops,
                             tuple(t for op in graph.ops for t in op.outputs), dict(graph.meta))
    return dict(zip(everything.outputs, interpret(everything, weights, inputs)))


class WritesParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            self.linear.weight.mul_(0.99)
        return self.linear(x).sum()


def test_a_parameter_written_in_forward_is_refused_naming_the_op_and_the_parameter():
    with pytest.raises(StateWriteError, match=r"op aten\.mul_\.Tensor .* writes parameter 'linear\.weight'"):
        _capture(WritesParameter(), torch.randn(2, 4))


class WritesThroughView(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.register_buffer("history", torch.zeros(2, 4))

    def forward(self, x):
        y = self.linear(x)
        with torch.no_grad():
            self.history[0].copy_(y.mean(0))
        return y.sum()


def test_a_buffer_written_through_a_view_is_carried_whole():
    torch.manual_seed(0)
    module, x = WritesThroughView().double(), torch.randn(2, 4, dtype=torch.float64)
    graph = _capture(module, x)
    (tensor,) = [t for b, t in graph.meta["state_updates"].items() if b == "history"]
    values = _values_of(graph, {n: t.clone() for n, t in [*module.named_parameters(), *module.named_buffers()]}, x)
    module(x)
    assert torch.allclose(values[tensor], module.history, rtol=1e-12, atol=0)
    assert module.history[0].abs().sum() > 0 and module.history[1].abs().sum() == 0


def test_batch_norm_with_a_cumulative_average_is_refused():
    with pytest.raises(ExportFailed, match="a Python value computed from tensor data"):
        _capture(nn.BatchNorm1d(4, momentum=None), torch.randn(3, 4))


def test_a_forward_that_writes_nothing_has_no_state():
    assert not _capture(nn.Linear(4, 2), torch.randn(3, 4)).meta["state_updates"]


def test_a_write_capture_cannot_carry_is_refused_naming_the_op_and_the_buffer():
    with pytest.raises(StateWriteError, match="op aten.weird_.default writes buffer 'stats'"):
        refuse_uncarried({"stats": "aten.weird_.default"}, {})
