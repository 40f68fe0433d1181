"""Saved tensors: views map to the tensor whose storage they keep; internals are counted in bytes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from stratagem.frontend import saved as saved_module
from stratagem.frontend import zoo
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


class Views(nn.Module):
    """Views of arguments (split, transpose), a weight kept through its transposed view, layer
    norm's statistics inside, and an op under no_grad: each call repeated per block."""

    def __init__(self) -> None:
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(6) for _ in range(3))
        self.fcs = nn.ModuleList(nn.Linear(3, 6) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for norm, fc in zip(self.norms, self.fcs):
            left, right = norm(x).split(3, dim=-1)
            with torch.no_grad():
                scale = right.abs().mean()
            x = fc(left.transpose(0, 1).transpose(0, 1)) * scale + x
        return x.sum()


def saved_with_and_without_replay(model, inputs, monkeypatch):
    """record_saved as it runs (repeated calls replayed), and with every call run; and how many
    calls were replayed."""
    program = export_program(model, inputs)
    replayed = []
    original = saved_module._SavedRecorder._replayed
    monkeypatch.setattr(saved_module._SavedRecorder, "_replayed",
                        lambda self, *a: replayed.append(self.current) or original(self, *a))
    fast = record_saved(program)
    monkeypatch.setattr(saved_module, "_replay_of", lambda *a: None)
    return fast, record_saved(program), len(replayed)


def test_a_repeated_call_saves_what_running_it_saves(monkeypatch):
    with torch.device("meta"):
        model = Views()
    fast, slow, replayed = saved_with_and_without_replay(model, (torch.empty(4, 6, device="meta"),), monkeypatch)
    assert fast.known and fast == slow
    assert replayed >= 2 * 8                     # the second and third blocks' calls, at least
    program = export_program(model, (torch.empty(4, 6, device="meta"),))
    linears = [n.name for n in program.graph.nodes if str(n.target) == "aten.linear.default"]
    assert [set(fast.saved[n]) & {f"p_fcs_{i}_weight" for i in range(3)} for n in linears] == \
        [{f"p_fcs_{i}_weight"} for i in range(3)]   # each its own weight, through the view
    norms = [n.name for n in program.graph.nodes if str(n.target) == "aten.layer_norm.default"]
    assert [fast.internal_num_bytes[n] for n in norms] == [2 * 4 * 4] * 3


@pytest.mark.parametrize("name", ["gpt-tiny", "nmt", "unet", "hf:t5-small"])
def test_replayed_calls_save_as_run_on_zoo_models(name, monkeypatch):
    model, inputs = zoo.module(name, "meta")
    fast, slow, replayed = saved_with_and_without_replay(model, inputs, monkeypatch)
    assert fast.known and fast == slow and replayed > 0
