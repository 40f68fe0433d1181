"""Twin blocks traced once (frontend/repeats.py): the program is the one tracing every block gives,
node by node, and blocks whose copy would not be exact are traced at every call."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

import stratagem.frontend.export as export_module
from stratagem.frontend.capture import capture
from stratagem.frontend.export import export_program
from stratagem.frontend.repeats import fingerprint
from stratagem.frontend.zoo.gpt import GPT, GPTConfig


def _export(model: nn.Module, inputs: tuple, monkeypatch, twins: bool):
    with monkeypatch.context() as patch:
        if not twins:
            patch.setattr(export_module, "twins_traced_once", lambda module: contextlib.nullcontext())
        return export_program(model, inputs)


def _described(node) -> tuple:
    """All of a node that capture reads or a later export pass could: name, op, target, arguments,
    value metadata, module stack and tensor metadata."""
    val = node.meta.get("val")
    value = (tuple(val.shape), val.stride(), val.storage_offset(), val.dtype, val.requires_grad) \
        if isinstance(val, torch.Tensor) else repr(val)
    return (node.op, node.name, str(node.target), str(node.args), str(node.kwargs), value,
            str(node.meta.get("nn_module_stack")), str(node.meta.get("tensor_meta")))


def _same_program(twin, full) -> None:
    assert [_described(n) for n in twin.graph.nodes] == [_described(n) for n in full.graph.nodes]
    assert str(twin.graph_signature) == str(full.graph_signature)


class _Counted(nn.Module):
    """A projection, then `blocks` in sequence (each block's forward counts its calls in `calls`):
    every block's input requires grad, as a layer's does."""

    def __init__(self, blocks: list[nn.Module]):
        super().__init__()
        self.embed = nn.Linear(8, 8)
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return x.sum()


class Plain(nn.Module):
    def __init__(self, calls: list, dim: int = 8):
        super().__init__()
        self.calls = calls
        self.norm = nn.LayerNorm(dim)
        self.linear = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.append(1)
        return x + torch.relu(self.linear(self.norm(x))) * 0.5


class ByIndex(Plain):
    """Behaves by its index: not a twin of the others."""

    def __init__(self, calls: list, index: int):
        super().__init__(calls)
        self.index = index

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        return y * 2 if self.index % 2 else y


class CountsSteps(Plain):
    """Writes a buffer of its own (the buffer's proxy changes): traced at every call."""

    def __init__(self, calls: list):
        super().__init__(calls)
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.steps.add_(1)
        return super().forward(x)


class KeepsOutput(Plain):
    """Sets an attribute while tracing: traced at every call."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.last = super().forward(x)
        return self.last


class ReadsConstant(Plain):
    """Reads a plain tensor attribute (a constant the trace lifts): traced at every call."""

    def __init__(self, calls: list, shift: torch.Tensor):
        super().__init__(calls)
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + self.shift


class ReturnsPair(Plain):
    """Returns a tensor and a constant; the model unpacks them."""

    def forward(self, x: torch.Tensor):
        return super().forward(x), None


class TakesAndReturnsNone(Plain):
    """Takes None and returns it beside its output: the same object as an argument, not a tensor."""

    def forward(self, x: torch.Tensor, nothing: None = None):
        return super().forward(x), nothing


class _PassesNone(_Counted):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x, nothing = block(x, None)
            assert nothing is None
        return x.sum()


class _Pairs(_Counted):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x, nothing = block(x)
            assert nothing is None
        return x.sum()


class _TwoLengths(_Counted):
    """Calls its blocks on two sequence lengths: one template per kind of call."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        short = x[:, :3]
        for block in self.blocks:
            x, short = block(x), block(short)
        return x.sum() + short.sum()


class Numbered(Plain):
    """Holds its index as a decoder layer does (`layer_idx`), and never reads it: a twin."""

    def __init__(self, calls: list, index: int):
        super().__init__(calls)
        self.layer_idx = index


class CastsInput(Plain):
    """Casts its input to the dtype it has: `to` returns the input itself, whose proxy moves to
    the `to` node, which the model's residual then reads."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(torch.float32)
        return super().forward(x)


class ReturnsItsInput(Plain):
    """Returns its input itself (cast to the dtype it has): traced at every call, as a copy's
    output would be another tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.append(1)
        return x.to(torch.float32)


class _Residual(_Counted):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x) + x
        return x.sum()


class Nested(nn.Module):
    """Inner blocks that read their index, in a list of its own."""

    def __init__(self, calls: list, indices: tuple[int, ...]):
        super().__init__()
        self.inner = nn.ModuleList([ByIndex(calls, i) for i in indices])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.inner:
            x = block(x)
        return x


def _inner_hooked(calls: list) -> Plain:
    block = Plain(calls)
    block.linear.register_forward_hook(lambda module, args, out: out * 3)
    return block


def _cases():
    shift = torch.ones(8)
    return {
        "twins": (lambda c: _Counted([Plain(c) for _ in range(4)]), 1),
        "indexed": (lambda c: _Counted([ByIndex(c, i) for i in range(4)]), 4),
        "writes a buffer": (lambda c: _Counted([CountsSteps(c) for _ in range(4)]), 4),
        "sets an attribute": (lambda c: _Counted([KeepsOutput(c) for _ in range(4)]), 4),
        "reads a constant": (lambda c: _Counted([ReadsConstant(c, shift) for _ in range(4)]), 4),
        "hook inside": (lambda c: _Counted([_inner_hooked(c) for _ in range(4)]), 4),
        "returns a pair": (lambda c: _Pairs([ReturnsPair(c) for _ in range(4)]), 1),
        "passes None through": (lambda c: _PassesNone([TakesAndReturnsNone(c) for _ in range(4)]), 1),
        # the first short input is a view of x (its strides), the later ones are contiguous outputs
        "two lengths": (lambda c: _TwoLengths([Plain(c) for _ in range(4)]), 3),
        "an index never read": (lambda c: _Counted([Numbered(c, i) for i in range(4)]), 1),
        "indices read in pairs": (lambda c: _Counted([ByIndex(c, i // 2) for i in range(4)]), 2),
        "casts its input": (lambda c: _Residual([CastsInput(c) for _ in range(4)]), 1),
        "returns its input": (lambda c: _Residual([ReturnsItsInput(c) for _ in range(4)]), 4),
        # the first outer block copies its second inner one: the copy's read of its index counts for
        # the outer template, so the second outer block (another index there) is traced
        "nested reads": (lambda c: _Counted([Nested(c, (0, 0)), Nested(c, (0, 1))]), 3),
    }


@pytest.mark.parametrize("case", list(_cases()))
def test_a_program_with_twins_is_the_one_tracing_every_block_gives(case, monkeypatch):
    make, traced = _cases()[case]
    x = torch.randn(2, 5, 8)
    full_calls, twin_calls = [], []
    full = _export(make(full_calls), (x,), monkeypatch, twins=False)
    twin = _export(make(twin_calls), (x,), monkeypatch, twins=True)
    _same_program(twin, full)
    assert len(full_calls) == 4 * (2 if case == "two lengths" else 1)
    assert len(twin_calls) == traced          # twins traced once per kind of call; the others every time


def test_twin_blocks_are_put_back_as_they_were(monkeypatch):
    calls = []
    model = _Counted([Plain(calls) for _ in range(3)])
    before = [set(vars(b)) for b in model.blocks]
    _export(model, (torch.randn(2, 5, 8),), monkeypatch, twins=True)
    assert [set(vars(b)) for b in model.blocks] == before
    assert all(b.forward.__func__ is Plain.forward for b in model.blocks)


def test_classes_are_put_back_after_their_reads_were_watched(monkeypatch):
    calls = []
    _export(_Counted([Numbered(calls, i) for i in range(3)]), (torch.randn(2, 5, 8),), monkeypatch, twins=True)
    assert "layer_idx" not in vars(Numbered) and "layer_idx" not in vars(Plain)
    assert [block.layer_idx for block in _Counted([Numbered(calls, i) for i in range(3)]).blocks] == [0, 1, 2]


def test_a_decoder_on_meta_is_captured_the_same_with_twins(monkeypatch):
    cfg = GPTConfig(64, 32, 3, 4, 2, 64, 16)
    with torch.device("meta"):
        model = GPT(cfg)
    tokens = torch.zeros(2, 16, dtype=torch.long, device="meta")
    with monkeypatch.context() as patch:
        patch.setattr(export_module, "twins_traced_once", lambda module: contextlib.nullcontext())
        full = capture(model, (tokens, tokens))
    twin = capture(model, (tokens, tokens))
    assert twin.ops == full.ops
    assert dict(twin.tensors) == dict(full.tensors) and twin.outputs == full.outputs
    assert twin.meta == full.meta


def test_fingerprints_tell_twins_apart():
    calls = []
    assert fingerprint(Plain(calls)) == fingerprint(Plain(calls))
    assert fingerprint(Plain(calls)) != fingerprint(Plain([]))             # another object
    assert fingerprint(Plain(calls, dim=8)) != fingerprint(Plain(calls, dim=4))
    assert fingerprint(ByIndex(calls, 0)) != fingerprint(ByIndex(calls, 1))
    assert fingerprint(ByIndex(calls, 0), loose=True) == fingerprint(ByIndex(calls, 1), loose=True)
    assert fingerprint(Plain(calls, dim=8), loose=True) != fingerprint(Plain(calls, dim=4), loose=True)
    trained, evaluated = Plain(calls), Plain(calls).eval()
    assert fingerprint(trained) != fingerprint(evaluated)
    assert fingerprint(_inner_hooked(calls)) is None
