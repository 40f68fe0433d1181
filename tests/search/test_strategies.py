"""The classic strategies (search.strategies) as the papers and practitioners lay them out."""

from __future__ import annotations

import pytest

from stratagem.frontend import zoo
from stratagem.search.context import context
from stratagem.search.strategies import tensor_parallel_strategy


@pytest.mark.parametrize("devices, tensor", [(2, 2), (4, 2), (4, 4)])
def test_megatron_layout_with_and_without_a_data_axis(devices, tensor):
    """Column-parallel linears feed attention split by heads and row-parallel linears (their
    reduction split), on a (data, tensor) mesh and on one whose data axis has a single device
    (the configuration drops that level: the strategy replicated everything after each column-parallel
    linear there, gathering its output)."""
    ctx = context(zoo.build("gpt-tiny-tiny", batch_size=8), f"cpu-1x{devices}", devices)
    strategy = tensor_parallel_strategy(ctx, tensor)
    inner = {}
    for op in ctx.graph.ops:
        levels = strategy[op.name].levels
        if levels and levels[-1].size == tensor and levels[-1].dim is not None:
            inner.setdefault(op.kind, set()).add(levels[-1].dim)
    analyses = ctx.model.analyses
    reductions = {d.name for op in ctx.graph.ops if op.kind == "linear" for d in analyses[op.name].dims if d.is_reduction}
    assert inner["linear"] & reductions and inner["linear"] - reductions       # row and column parallel
    assert "scaled_dot_product_attention" in inner


@pytest.mark.parametrize("devices, tensor", [(2, 2), (4, 2)])
def test_sequence_parallelism_splits_what_megatron_replicates_between_the_linears(devices, tensor):
    """With sequence parallelism the residual adds after each row-parallel linear split over the
    tensor axis (the index the data axis leaves), the norms after them follow, and the linears
    reading the norms stay column parallel; without it all of these replicate there."""
    ctx = context(zoo.build("gpt-tiny-tiny", batch_size=8), f"cpu-1x{devices}", devices)
    plain, sequence = (tensor_parallel_strategy(ctx, tensor, sp) for sp in (False, True))
    graph, analyses = ctx.graph, ctx.model.analyses

    def inner(strategy, name):
        levels = strategy[name].levels
        return levels[-1].dim if levels and levels[-1].size == tensor else None

    row = [op.name for op in graph.ops if op.kind == "linear" and inner(plain, op.name) in
           {d.name for d in analyses[op.name].dims if d.is_reduction}]
    assert len(row) == 2 * 2                                     # two blocks: attention's and the MLP's
    for name in row:
        (add,) = graph.consumers[graph.op(name).outputs[0]]
        assert add.kind == "add" and inner(plain, add.name) is None and inner(sequence, add.name) is not None
        norms = [op for op in graph.consumers[add.outputs[0]] if op.kind == "rms_norm"]
        for norm in norms:
            assert inner(sequence, norm.name) == inner(sequence, add.name)
            for linear in graph.consumers[norm.outputs[0]]:
                assert inner(sequence, linear.name) == inner(plain, linear.name)    # column parallel
