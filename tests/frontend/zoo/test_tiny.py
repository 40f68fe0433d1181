"""Every tiny variant captures into a checked graph that ends in a scalar loss, and the reference
interpreter reproduces the module's loss (skipped, naming the op kinds, while TORCH_OPS lacks some).

Same math, so captured and compared in float64 (ops the module itself casts to float32, as Hugging
Face decoders do with their logits and T5 with its norms' variance, stay float32) within the
rounding bound of the graph (stratagem.tdl.rounding), whatever BLAS kernel or thread count either
evaluation takes."""

from __future__ import annotations

import warnings

import pytest
import torch

from stratagem.frontend import capture, zoo
from stratagem.frontend.interpret import interpret, missing_kinds
from stratagem.frontend.precision import cast_floating
from stratagem.tdl.rounding import same_math_rtol

pytestmark = pytest.mark.numerics     # run under every kernel path by scripts/numerics_variants.sh


@pytest.mark.parametrize("name", [n + "-tiny" for n in zoo.names()])
def test_tiny_variant_captures_and_interprets_to_the_module_loss(name, checked):
    if zoo.info(name).requires:
        pytest.importorskip(zoo.info(name).requires)
    model, inputs = zoo.module(name, "cpu")
    model, inputs = model.double(), cast_floating(inputs, torch.float64)
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
    torch.testing.assert_close(got, expected, atol=0, rtol=same_math_rtol(graph))
