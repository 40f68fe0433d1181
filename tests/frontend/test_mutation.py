"""Writes through views become functional, so the IR computes what eager computes."""

from __future__ import annotations

import warnings

import torch
from torch import nn

from stratagem.frontend import capture
from stratagem.frontend.interpret import interpret


class ShiftRight(nn.Module):
    """What T5 does to its labels: write through a slice and a select of a fresh tensor."""

    def forward(self, labels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        shifted = labels.new_zeros(labels.shape)
        shifted[:, 1:] = labels[:, :-1].clone()
        shifted[:, 0] = 7
        shifted.masked_fill_(shifted == 3, 0)
        return (weights[shifted] * 1.5).sum()


def test_writes_through_views_reach_later_readers(checked):
    labels = torch.tensor([[1, 3, 5, 2], [4, 3, 3, 6]])
    weights = torch.arange(10, dtype=torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = checked(capture(ShiftRight(), (labels, weights), sample_dims=[0, None]))
    targets = {op.attrs.get("target") for op in graph.ops}
    assert {"aten.slice_scatter.default", "aten.select_scatter.default"} <= targets
    assert "aten.copy_.default" not in targets
    (got,) = interpret(graph, nn.Module(), (labels, weights))
    assert torch.equal(got, ShiftRight()(labels, weights))
