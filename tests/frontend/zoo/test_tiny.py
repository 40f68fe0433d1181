"""Every tiny variant captures into a checked graph that ends in a scalar loss, and the reference
interpreter reproduces the module's loss (skipped, naming the op kinds, while TORCH_OPS lacks some)."""

from __future__ import annotations

import warnings

import pytest
import torch

from stratagem.frontend import capture, zoo
from stratagem.frontend.interpret import interpret, missing_kinds


@pytest.mark.parametrize("name", [n + "-tiny" for n in zoo.names()])
def test_tiny_variant_captures_and_interprets_to_the_module_loss(name, checked):
    if zoo.info(name).requires:
        pytest.importorskip(zoo.info(name).requires)
    model, inputs = zoo.module(name, "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = checked(capture(model, inputs, name=name))
    (loss,) = graph.outputs
    assert graph.tensors[loss].shape == ()
    assert graph.num_parameters == sum(p.numel() for p in model.parameters())
    missing = missing_kinds(graph)
    if missing:
        pytest.skip(f"TORCH_OPS has no implementation of {', '.join(missing)}")
    torch.manual_seed(0)
    expected = model(*inputs).detach()
    torch.manual_seed(0)
    (got,) = interpret(graph, model, inputs)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
