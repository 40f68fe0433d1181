"""The same-training comparison: its bounds come from the computation, hold for the same training,
and catch what a wrong plan would do (a gradient off by a factor, which Adam's normalization hides
from the parameters; a parameter off by one step; a loss off in its last digits)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from stratagem.frontend import zoo
from stratagem.ir import Graph
from stratagem.plan import Plan
from stratagem.runtime.compare import compare, reference_tolerance
from stratagem.runtime.training import reference_run, training_spec
from stratagem.space import Configuration
from stratagem.tdl.rounding import rounding_steps

pytestmark = pytest.mark.numerics     # run under every kernel path by scripts/numerics_variants.sh

STEPS = 2


@pytest.fixture(scope="module")
def graph_and_reference():
    graph = zoo.build("mlp-tiny", batch_size=4)
    plan = Plan(graph, "cpu-1x1", 1, {op.name: Configuration(()) for op in graph.ops}, model="mlp-tiny")
    return graph, reference_run(training_spec(plan, dtype="float64"), STEPS)


def test_a_run_equal_to_the_reference_is_the_same_training(graph_and_reference):
    graph, ref = graph_and_reference
    result = compare(graph, ref.losses, ref, ref.gradients, ref.parameters)
    assert result.same_training and result.max_loss_excess == 0 and result.max_grad_diff == 0


def test_the_bounds_are_the_derived_ones(graph_and_reference):
    graph, ref = graph_and_reference
    tol = reference_tolerance(graph, ref)
    assert tol.step_rtol == pytest.approx(2 * 2.0 ** -53 * 3 * rounding_steps(graph))
    assert tol.grad_atol == pytest.approx(tol.step_rtol * ref.max_gradient)
    assert tol.param_atol_per_step == pytest.approx(1e-3 / 1e-8 * tol.grad_atol)   # Adam, lr 1e-3
    assert tol.param_atol_per_step * STEPS < 1e-3 / 100    # far below one wrong step


def test_a_gradient_off_by_a_factor_is_caught(graph_and_reference):
    graph, ref = graph_and_reference
    doubled = {n: 2 * g for n, g in ref.gradients.items()}
    result = compare(graph, ref.losses, ref, doubled, ref.parameters)
    assert not result.same_training and result.worst_gradient is not None


def test_a_parameter_one_step_off_is_caught(graph_and_reference):
    graph, ref = graph_and_reference
    name = next(iter(ref.parameters))
    moved = {**ref.parameters, name: ref.parameters[name] + ref.spec.lr}
    result = compare(graph, ref.losses, ref, ref.gradients, moved)
    assert not result.same_training and result.worst_parameter == name


def test_a_loss_off_in_float32_rounding_is_caught_in_float64(graph_and_reference):
    graph, ref = graph_and_reference
    losses = [x * (1 + 2.0 ** -24) for x in ref.losses]
    assert not compare(graph, losses, ref).same_training


def test_a_missing_gradient_is_caught(graph_and_reference):
    graph, ref = graph_and_reference
    name = next(iter(ref.gradients))
    partial = {n: g for n, g in ref.gradients.items() if n != name}
    result = compare(graph, ref.losses, ref, partial)
    assert not result.same_training and result.worst_gradient == name


def test_state_buffers_off_by_a_step_are_caught():
    graph = zoo.build("lenet-tiny", batch_size=4)     # no batch norm: give it a state buffer by hand
    plan = Plan(graph, "cpu-1x1", 1, {op.name: Configuration(()) for op in graph.ops}, model="lenet-tiny")
    ref = reference_run(training_spec(plan, dtype="float64"), 1)
    counted = replace(ref, buffers={**ref.buffers, "steps": torch.tensor(1)})
    stateful = Graph.build(graph.name, tuple(graph.tensors.values()), graph.ops, graph.outputs,
                           {**dict(graph.meta), "state_updates": {"steps": graph.outputs[0]}})
    same = compare(stateful, ref.losses, counted, buffers={"steps": torch.tensor(1)})
    assert same.same_training and same.max_buffer_excess == 0
    assert not compare(stateful, ref.losses, counted, buffers={"steps": torch.tensor(2)}).same_training
    assert not compare(stateful, ref.losses, counted, buffers={}).same_training
