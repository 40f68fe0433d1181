"""The baselines are the strategies their papers describe."""

from __future__ import annotations

from stratagem import zoo
from stratagem.search.baselines import data_parallel_strategy, owt_strategy
from stratagem.search.planner import context


def test_owt_splits_only_the_fully_connected_layers_by_output_features():
    ctx = context(zoo.build("inception-v3"), "p100-4x4", devices=4)
    owt, dp = owt_strategy(ctx), data_parallel_strategy(ctx)
    changed = {op.name: op.kind for op in ctx.graph.ops if owt[op.name] != dp[op.name]}
    assert changed and set(changed.values()) == {"linear"}        # convs and batch norms stay
    for name in changed:
        kinds = {ctx.model.analyses[name].dim(d).kind for d in owt[name].degrees}
        assert kinds == {"parameter"} and owt[name].num_devices == 4
