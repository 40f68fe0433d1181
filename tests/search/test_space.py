"""The FT search space (search.space): a point of the problem unrolls to the strategy and the
tensor-reuse choices that the cost model prices it under."""

import numpy as np
import pytest

from stratagem.frontend import zoo
from stratagem.search.context import context
from stratagem.search.ft_search import FTSearchOptions
from stratagem.search.space import build_search_space


def _priced_choices(model, strategy, space, options) -> dict[int, str]:
    """The oracle: every cross edge's chosen option, kept where the cost model prices the edge
    under another by default (an empty option is none)."""
    edges, found = model.edges(), {}
    for e, r in zip(space.cross_edges, options):
        edge = edges[e.model_edge]
        src = strategy[edge.src_op] if edge.src_op else None
        cost = model.edge_cost(edge.tensor, edge.src_op, src, edge.dst_op, strategy[edge.dst_op])
        names = [o.name for o in cost.reuse] or [cost.default_reuse]
        name = (names[r] if r < len(names) else names[0]) or ""
        if name and name != cost.default_reuse:
            found[e.model_edge] = name
    return found


@pytest.mark.parametrize("name", ["mlp", "lenet"])
@pytest.mark.parametrize("state_sharding", [False, True])
def test_a_point_unrolls_to_the_reuse_choices_the_cost_model_prices_apart(name, state_sharding):
    """Only choices other than the edge's default come back, as the cost model has them: what a
    plan records and the simulator applies (models whose edges have reuse options)."""
    ctx = context(zoo.build(name), "a100-1x8", 4)
    space = build_search_space(ctx.model, FTSearchOptions(state_sharding=state_sharding).searched_space)
    rng = np.random.default_rng(0)
    widths = [e.mem.shape[0] for e in space.problem.edges]
    non_default = 0
    for _ in range(24):
        assignment = tuple(int(rng.integers(n)) for n in space.problem.num_configs)
        options = tuple(int(rng.integers(w)) for w in widths)
        strategy, reuse = space.strategy(assignment, options)
        assert reuse == _priced_choices(ctx.model, strategy, space, options)
        non_default += len(reuse)
    assert non_default > 0
