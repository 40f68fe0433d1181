"""Plans for the distributed tests: tiny zoo models at batch 8, from every search on main."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from stratagem.cost.edgecost import build_edge_cost
from stratagem.frontend import zoo
from stratagem.plan import Plan
from stratagem.search import registry
from stratagem.search.context import context

BATCH = 8
# searches with a time budget get a fixed number of proposals instead: the same plan every run
ARGS = {"mcmc": {"budget_s": None, "max_proposals": 60, "seed": 0},
        "exhaustive": {"coarsen": True, "max_time_s": 60.0}}


@lru_cache(maxsize=None)
def plan(model: str, algorithm: str, devices: int) -> Plan:
    graph = zoo.build(model, batch_size=BATCH)
    return registry.run(context(graph, f"cpu-1x{devices}", devices), algorithm, ARGS.get(algorithm, {}))


def saved(directory: Path, model: str, algorithm: str, devices: int) -> Path:
    path = directory / f"{model}-{algorithm}-{devices}.json"
    if not path.exists():
        plan(model, algorithm, devices).save(path)
    return path


def reduce_scatters(ctx, strategy) -> int:
    """How many edges of the strategy move a partial sum with a reduce-scatter in forward."""
    model = ctx.model
    return sum(any(step.kind == "reduce_scatter" for step in build_edge_cost(
        model, edge.tensor, edge.src_op, strategy[edge.src_op], edge.dst_op, strategy[edge.dst_op]).forward_steps)
        for edge in model.edges() if edge.src_op is not None)
