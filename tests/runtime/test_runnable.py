"""Refusing what the runtime cannot run, before launching: sub-blocks of devices, irregular
placements, uneven splits, splits no local kernel computes, non-sum partials; and the searches'
plans, which must all run."""

from __future__ import annotations

import pytest

from stratagem.frontend import zoo
from stratagem.ir import Graph, Op, Role, TensorSpec
from stratagem.plan import Plan
from stratagem.runtime.errors import NotRunnable
from stratagem.runtime.runnable import check_runnable, require_runnable
from stratagem.space import Configuration, Level, SpaceOptions, enumerate_configurations
from stratagem.space.runnable import refusal
from stratagem.tdl.graphops import AnalysisCache

from .plans import plan


def _plan(graph: Graph, strategy: dict[str, Configuration], devices: int) -> Plan:
    return Plan(graph, f"cpu-1x{devices}", devices, strategy)


def _one_op(kind: str, shapes: list[tuple[int, ...]], out: tuple[int, ...], **attrs) -> Graph:
    tensors = [TensorSpec(f"x{i}", s, role=Role.INPUT, sample_dim=0) for i, s in enumerate(shapes)]
    tensors.append(TensorSpec("y", out))
    return Graph.build("g", tensors, [Op("op", kind, tuple(f"x{i}" for i in range(len(shapes))), ("y",), attrs)],
                       ("y",))


def test_model_parallel_is_refused_op_by_op_naming_the_devices():
    refused = check_runnable(plan("mlp-tiny", "model-parallel", 2))
    assert len(refused) == 6
    assert "runs on devices 0..0 of 2" in refused[0].reason and refused[0].op == "linear"
    with pytest.raises(NotRunnable) as error:
        require_runnable(plan("mlp-tiny", "model-parallel", 2))
    assert "linear (linear, single@0)" in str(error.value) and "Nothing was launched" in str(error.value)


def test_a_convolution_halo_runs_and_a_shifted_region_is_refused():
    """A convolution split along rows reads a halo the runtime exchanges (runtime.halo); an op
    reading shifted regions without a window adapter (narrow) is refused as irregular."""
    graph = zoo.build("lenet-tiny", batch_size=8)
    strategy = {op.name: Configuration((Level(None, 2),)) for op in graph.ops}
    strategy["conv2d"] = Configuration((Level("h", 2),))
    assert check_runnable(_plan(graph, strategy, 2)) == []
    narrow = _one_op("narrow", [(4, 12)], (4, 6), dim=1, start=2, length=6)
    refused = check_runnable(_plan(narrow, {"op": Configuration((Level("d1", 2),))}, 2))
    assert [r.op for r in refused] == ["op"] and "irregular region" in refused[0].reason


def test_an_uneven_split_is_refused():
    graph = _one_op("relu", [(6, 4)], (6, 4))
    refused = check_runnable(_plan(graph, {"op": Configuration((Level("d0", 4),))}, 4))
    assert refused and "uneven" in refused[0].reason


def test_a_split_no_local_kernel_computes_is_refused_with_its_reason():
    graph = _one_op("var", [(4, 8)], (4,), dim=(1,), correction=1, keepdim=False)
    analysis = AnalysisCache(graph)["op"]
    reduced = next(d.name for d in analysis.dims if d.is_reduction)
    reason = refusal(analysis, Configuration((Level(reduced, 2),)), 2)
    assert reason and "element count of the whole reduction" in reason


def test_a_partial_max_is_refused():
    graph = _one_op("amax", [(4, 8)], (4,), dim=(1,), keepdim=False)
    analysis = AnalysisCache(graph)["op"]
    reduced = next(d.name for d in analysis.dims if d.is_reduction)
    assert "P(max)" in refusal(analysis, Configuration((Level(reduced, 2),)), 2)


def test_adapted_splits_are_not_refused():
    graph = _one_op("softmax", [(4, 8)], (4, 8), dim=-1)
    assert refusal(AnalysisCache(graph)["op"], Configuration((Level("d1", 2),)), 2) is None


def test_the_runnable_space_keeps_exactly_what_runs():
    graph = zoo.build("transformer-tiny", batch_size=8)
    analyses = AnalysisCache(graph)
    everything = kept = 0
    for op in graph.ops:
        full = enumerate_configurations(analyses[op.name], 4, SpaceOptions())
        runs = enumerate_configurations(analyses[op.name], 4, SpaceOptions(runnable=True))
        assert set(runs) == {c for c in full if refusal(analyses[op.name], c, 4) is None}
        everything, kept = everything + len(full), kept + len(runs)
    assert 0 < kept < everything


@pytest.mark.parametrize("model", ["mlp-tiny", "lenet-tiny", "transformer-tiny", "rnnlm-2-tiny"])
@pytest.mark.parametrize("devices", [2, 4])
def test_ft_default_plans_run(model, devices):
    assert check_runnable(plan(model, "ft", devices)) == []
