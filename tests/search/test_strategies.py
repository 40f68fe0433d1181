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
