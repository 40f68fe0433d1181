"""Unusual and bad models given to capture (sg.capture): each either captures into a graph checked
to compute what the module computes, or is refused with a StratagemError that names what is wrong
and what to do; no traceback from deep inside the IR, nothing silently trained differently."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import stratagem as sg
from stratagem.errors import StratagemError
from stratagem.frontend.interpret import interpret

from .helpers import assert_says


def _capture(module, inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sg.capture(module, inputs)


def _same_outputs(module, inputs):
    graph = _capture(module, inputs)
    module, inputs = module.double(), tuple(x.double() if x.is_floating_point() else x for x in inputs)
    got = interpret(graph, module, inputs, torch.float64)
    want = module(*inputs)
    want = want if isinstance(want, (tuple, list)) else (want,)
    flat = [w for w in torch.utils._pytree.tree_leaves(want) if isinstance(w, torch.Tensor)]
    assert len(got) == len(flat)
    for g, w in zip(got, flat):
        torch.testing.assert_close(g.to(w.dtype), w.detach(), rtol=1e-9, atol=1e-12)
    return graph


class Lambda(nn.Module):
    def __init__(self, fn, *modules):
        super().__init__()
        self.fn, self.parts = fn, nn.ModuleList(modules)

    def forward(self, *xs):
        return self.fn(self.parts, *xs)


X = torch.randn(4, 6)


class DecaysInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 6)

    def forward(self, x):
        with torch.no_grad():
            self.linear.weight.mul_(0.99)
        return self.linear(x).sum()


# ---- refused, naming what and why ---------------------------------------------------------------

REFUSED = {
    "boolean mask indexing": (Lambda(lambda m, x: m[0](x)[m[0](x) > 0].sum(), nn.Linear(6, 6)), (X,),
                              ["aten.index.Tensor", "depends on the values", "torch.where"]),
    "nonzero": (Lambda(lambda m, x: m[0](x).sum() + torch.nonzero(x > 0).sum(), nn.Linear(6, 6)), (X,),
                ["aten.nonzero.default", "depends on the values"]),
    "unique": (Lambda(lambda m, x: m[0](x).sum() + torch.unique(x.long()).sum(), nn.Linear(6, 6)), (X,),
               ["depends on the values"]),
    "masked_select": (Lambda(lambda m, x: torch.masked_select(m[0](x), x > 0).sum(), nn.Linear(6, 6)), (X,),
                      ["depends on the values"]),
    "top-1 routing without capacity": (
        Lambda(lambda m, x: sum(m[i + 1](x[m[0](x).argmax(1) == i]).sum() for i in range(2)),
               nn.Linear(6, 2), nn.Linear(6, 6), nn.Linear(6, 6)), (X,), ["depends on the values"]),
    ".item() in forward": (Lambda(lambda m, x: m[0](x).sum() * float(x.max()), nn.Linear(6, 6)), (X,),
                           ["torch.export could not trace", "a Python value computed from tensor data"]),
    "branch on a tensor value": (Lambda(lambda m, x: m[0](x).sum() if x.sum() > 0 else x.sum(), nn.Linear(6, 6)),
                                 (X,), ["torch.export could not trace"]),
    "parameter updated in forward": (DecaysInForward(), (X,),
                                     ["aten.mul_.Tensor", "writes parameter 'linear.weight'",
                                      "Move the update out of forward"]),
    "parameter updated through .data": (
        Lambda(lambda m, x: (m[0].weight.data.mul_(0.5), m[0](x).sum())[1], nn.Linear(6, 6)), (X,),
        ["torch.export could not trace"]),
    "batch norm with a cumulative average": (nn.BatchNorm1d(6, momentum=None), (X,),
                                             ["a Python value computed from tensor data", "momentum=None"]),
    "input of the wrong shape": (nn.Linear(6, 3), (torch.randn(4, 5),), ["torch.export could not trace"]),
    "inputs by a name forward lacks": (nn.Linear(6, 3), {"inputs": X}, ["do not fit the module's forward",
                                                                     "Did you mean input"]),
    "too many inputs": (nn.Linear(6, 3), (X, X), ["torch.export could not trace"]),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_model_capture_cannot_plan_is_refused_with_the_reason(case):
    module, inputs, fragments = REFUSED[case]
    with pytest.raises(StratagemError) as error:
        _capture(module, inputs)
    assert_says(str(error.value), *fragments)


# ---- captured, and checked to compute what the module computes ------------------------------------

class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 3)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.calls += 1
        return self.linear(x).sum()


CAPTURED = {
    "a tuple of outputs": (Lambda(lambda m, x: (m[0](x).sum(), m[0](x).mean()), nn.Linear(6, 3)), (X,)),
    "a dict of outputs": (Lambda(lambda m, x: {"loss": m[0](x).sum(), "aux": m[0](x)}, nn.Linear(6, 3)), (X,)),
    "a non-scalar output": (nn.Linear(6, 3), (X,)),
    "no parameters": (Lambda(lambda m, x: torch.tanh(x).sum()), (X,)),
    "an integer input beside a float one": (Lambda(lambda m, x, i: m[0](x)[torch.arange(4), i].sum(), nn.Linear(6, 3)),
                                            (X, torch.tensor([0, 1, 2, 0]))),
    "a shared (tied) parameter": (Lambda(lambda m, x: (m[0](x) @ m[0].weight).sum(), nn.Linear(6, 6)), (X,)),
    "a buffer counted in forward": (Counting(), (X,)),
    "inputs by name": (nn.Linear(6, 3), {"input": X}),
}


@pytest.mark.parametrize("case", sorted(CAPTURED))
def test_an_unusual_model_captures_and_computes_what_the_module_does(case):
    module, inputs = CAPTURED[case]
    if isinstance(inputs, dict):
        graph = _capture(module, inputs)
        assert graph.inputs and len(graph.ops) >= 1
        return
    _same_outputs(module, inputs)


def test_a_counted_buffer_is_carried_as_state():
    graph = _capture(Counting(), (X,))
    assert list(graph.meta["state_updates"]) == ["calls"]


def test_a_model_on_the_meta_device_captures_without_memory():
    with torch.device("meta"):
        module, x = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10)), torch.randn(8, 4096)
    graph = _capture(module, (x,))
    assert graph.num_parameters == sum(p.numel() for p in module.parameters())


def test_a_stock_decoder_with_a_kv_cache_by_default_captures():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16)
    model = transformers.LlamaForCausalLM(config)
    assert model.config.use_cache
    graph = _capture(model, (torch.randint(0, 64, (2, 8)),))
    assert graph.meta["cache_turned_off"] and model.config.use_cache
