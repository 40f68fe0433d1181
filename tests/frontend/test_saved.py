"""Saved tensors: views map to the tensor whose storage they keep; internals are counted in bytes."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from stratagem.frontend.export import export_program
from stratagem.frontend.saved import record_saved


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(6)
        self.fc = nn.Linear(6, 6)
        self.frozen = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            y = self.frozen(x)
        return F.gelu(self.fc(self.norm(x + y))).sum()


def record():
    with torch.device("meta"):
        model = Block()
    program = export_program(model, (torch.empty(4, 6, device="meta"),))
    return program, record_saved(program)


def node_named(program, target):
    return next(n.name for n in program.graph.nodes if n.op == "call_function" and str(n.target) == target)


def test_a_linear_keeps_its_input_and_its_weight_through_a_transposed_view():
    program, saved = record()
    fc = [n.name for n in program.graph.nodes if str(n.target) == "aten.linear.default"][-1]
    assert set(saved.saved[fc]) == {node_named(program, "aten.layer_norm.default"), "p_fc_weight"}


def test_layer_norm_statistics_are_internal_bytes():
    program, saved = record()
    norm = node_named(program, "aten.layer_norm.default")
    assert saved.internal_num_bytes[norm] == 2 * 4 * 4   # mean and rstd: [4, 1] fp32 each
    assert set(saved.saved[norm]) >= {"p_norm_weight", node_named(program, "aten.add.Tensor")}


def test_nothing_is_saved_under_no_grad():
    program, saved = record()
    frozen = [n.name for n in program.graph.nodes if str(n.target) == "aten.linear.default"][0]
    assert frozen not in saved.saved and frozen not in saved.requires_grad
    assert node_named(program, "aten.gelu.default") in saved.requires_grad
