"""The baselines are the strategies their papers describe."""

from __future__ import annotations

from stratagem import zoo
from stratagem.search.strategies import data_parallel_strategy, owt_strategy
from stratagem.search.context import context


def test_owt_splits_only_the_fully_connected_layers_by_output_features():
    ctx = context(zoo.build("inception-v3"), "p100-4x4", devices=4)
    owt, dp = owt_strategy(ctx), data_parallel_strategy(ctx)
    changed = {op.name: op.kind for op in ctx.graph.ops if owt[op.name] != dp[op.name]}
    assert changed and set(changed.values()) == {"linear"}        # convs and batch norms stay
    for name in changed:
        kinds = {ctx.model.analyses[name].dim(d).kind for d in owt[name].degrees}
        assert kinds == {"parameter"} and owt[name].num_devices == 4


def test_restricted_baselines_replicate_what_they_cannot_split():
    # batch 2 on 4 devices: the loss (split only along the batch) has no split over all 4 devices
    # without replication; ToFu's space (TensorOpt §5.1) then replicates it rather than failing
    from stratagem.search.planner import search
    graph = zoo.build("mlp-tiny", batch_size=2)
    tofu_like = search(graph, "cpu-1x4", algorithm="tofu-like", devices=4)
    loss = tofu_like.strategy["cross_entropy_loss"]
    assert loss.num_devices == 4 and any(level.dim is None for level in loss.levels)
    assert all(c.degrees for name, c in tofu_like.strategy.items() if name != "cross_entropy_loss")
    mesh_tf = search(graph, "cpu-1x4", algorithm="mesh-tf", devices=4)
    assert mesh_tf.iteration_time_s > 0 and set(mesh_tf.strategy) == {op.name for op in graph.ops}
