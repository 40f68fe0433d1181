"""ToFu and Mesh-TF as the papers have them, even where some op cannot split as their space asks:
such ops replicate, and a Mesh-TF space too large to enumerate is refused."""

from __future__ import annotations

import warnings

import pytest

import stratagem as sg
from stratagem.search import baselines
from stratagem.search.baselines import MeshTFOptions, RestrictedOptions
from stratagem.search.context import context


@pytest.fixture(scope="module")
def tiny_ctx():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = sg.zoo.build("rnn-tiny")
    return context(graph, "v100-2x8", 2)


def test_tofu_like_splits_every_op_that_can_split_over_all_devices(tiny_ctx):
    plan = baselines.tofu_like(tiny_ctx, RestrictedOptions(runnable=False))
    assert plan.algorithm == "tofu-like" and plan.iteration_time_s > 0
    for op in tiny_ctx.graph.ops:
        config = plan.strategy[op.name]
        assert config.num_devices == tiny_ctx.num_devices          # no op on fewer devices
        if tiny_ctx.model.configurations(op.name, baselines.TOFU_SPACE):
            assert all(level.dim is not None for level in config.levels), (op.name, config)


def test_mesh_tf_replicates_scalars_and_refuses_spaces_too_large(tiny_ctx):
    scalars = [op.name for op in tiny_ctx.graph.ops if not tiny_ctx.model.analyses[op.name].dims]
    assert scalars                                           # rnn-tiny sums its per-step losses
    front = baselines.mesh_tf_frontier(tiny_ctx)
    assert all(level.dim is None for p in front for op in scalars for level in p.strategy[op].levels)
    assert len(front) >= 1 and all(p.algorithm == "mesh-tf" for p in front)
    with pytest.raises(baselines.TooManyLayouts, match="at most 1 layouts"):
        baselines.mesh_tf_frontier(tiny_ctx, MeshTFOptions(layout_limit=1))


def test_a_fix_on_a_merged_node_is_reported_not_a_crash():
    """ToFu's space on nmt-tiny at 8 devices fixes a node that branch elimination merged (its
    index runs over both nodes' configurations); the frontier reports it and goes on."""
    plan = baselines.tofu_like(context(sg.zoo.build("nmt-tiny"), "a100-1x8", 8), RestrictedOptions(runnable=False))
    fixes = plan.details["heuristic_fixes"]
    assert any("merged" in f["config"] for f in fixes) and plan.iteration_time_s > 0
