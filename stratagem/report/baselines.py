"""The baselines as the reports draw them: `stratagem.search.baselines`, made robust to ops that a
restricted space cannot split at all.

    restricted_frontier(ctx, space)   FT over a restricted space, replicating what it cannot split
    tofu_like(ctx)          ToFu (TensorOpt §5.1): every op split over all devices, no replication;
                            an op with no such split (a scalar loss sum, a batch smaller than the
                            device count) is replicated instead of failing the whole search
    mesh_tf_frontier(ctx)   Mesh-TensorFlow's restricted space; ops with no dims (scalars) are
                            replicated over the mesh, as Mesh-TensorFlow does with scalars

Baselines are the papers' strategies as they are: searched over the papers' whole space
(runnable=False), not only what stratagem.runtime executes. The search layer's `mesh_tf_frontier`
is tried first. (The search layer now replicates such ops itself, `search.space._configurations`;
the fallback here stays for spaces built elsewhere.)
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from stratagem.errors import StratagemError
from stratagem.plan import Frontier, Plan
from stratagem.space import Configuration, Level, SpaceOptions

TOFU_SPACE = SpaceOptions(allow_fewer_devices=False, allow_replicate=False)
MESH_TF_AXES = 2                  # mesh_tf_strategies' default
MESH_TF_LAYOUT_LIMIT = 20_000     # Mesh-TF enumerates every layout; more than this takes hours


class TooManyLayouts(StratagemError):
    """Mesh-TensorFlow's space is too large to enumerate."""


class ReplicateWhereNothingSplits:
    """A cost model whose configurations fall back to replicated axes (still over every device)
    for an op that has none in the requested space."""

    def __init__(self, model):
        self._model = model

    def __getattr__(self, name: str):
        return getattr(self._model, name)

    def configurations(self, op_name: str, options: SpaceOptions = SpaceOptions()) -> tuple[Configuration, ...]:
        found = self._model.configurations(op_name, options)
        return found or self._model.configurations(op_name, replace(options, allow_replicate=True))


def tofu_like(ctx) -> Plan:
    space = replace(TOFU_SPACE, max_axes=_ft_max_axes())
    return replace(restricted_frontier(ctx, space).min_time, algorithm="tofu-like")


def restricted_frontier(ctx, space: SpaceOptions) -> Frontier:
    """FT's frontier over a restricted space (within the papers' whole space, not only what the
    runtime executes); ops with no configuration in it are replicated."""
    from stratagem.search.planner import frontier
    lenient = replace(ctx, model=ReplicateWhereNothingSplits(ctx.model))
    return frontier(ctx.graph, ctx.cluster, ctx=lenient, space=space, runnable=False)


def _ft_max_axes() -> int:
    from stratagem.search.space import FT_SPACE
    return FT_SPACE.max_axes


def mesh_tf_layout_count(ctx) -> int:
    """How many (mesh shape, logical dim per axis) layouts `mesh_tf_strategies` walks."""
    from stratagem.search.baselines import logical_dims
    from stratagem.space import ordered_factorizations
    names = len(set(logical_dims(ctx).values()))
    return sum((names + 1) ** len(shape) for shape in ordered_factorizations(ctx.num_devices, MESH_TF_AXES))


def mesh_tf_frontier(ctx, layout_limit: int = MESH_TF_LAYOUT_LIMIT) -> Frontier:
    from stratagem.search import baselines
    count = mesh_tf_layout_count(ctx)
    if count > layout_limit:
        raise TooManyLayouts("Mesh-TF's space is too large to enumerate", expected=f"at most {layout_limit:,} layouts",
                             got=f"about {count:,} (every logical dim on every axis of every 2-axis mesh)")
    try:
        return baselines.mesh_tf_frontier(ctx)
    except KeyError:              # an op with no dims (a scalar) has no logical dim to look up
        return _mesh_tf_with_scalars(ctx)


def _mesh_tf_with_scalars(ctx) -> Frontier:
    import numpy as np

    from stratagem.search.baselines import mesh_tf_strategies
    from stratagem.search.frontier import Frontier as RawFrontier
    from stratagem.search.planner import make_plan
    from stratagem.search.space import additive_cost
    scalars = [op for op in ctx.graph.ops if not ctx.model.analyses[op.name].dims]
    shaped = SimpleNamespace(graph=SimpleNamespace(ops=tuple(op for op in ctx.graph.ops if op not in scalars)),
                             model=ctx.model, num_devices=ctx.num_devices)
    seen, candidates = set(), []
    for (shape, chosen), strategy in mesh_tf_strategies(shaped):
        strategy.update({op.name: Configuration(tuple(Level(None, s) for s in shape)) for op in scalars})
        signature = tuple(sorted((op, str(c)) for op, c in strategy.items()))
        if signature not in seen:
            seen.add(signature)
            candidates.append((additive_cost(ctx.model, strategy), strategy, (shape, chosen)))
    mems = np.array([c[0][0] for c in candidates])
    times = np.array([c[0][1] for c in candidates])
    kept = RawFrontier.reduce(mems, times, list(range(len(candidates)))).payload
    plans = [make_plan(ctx, candidates[i][1], "mesh-tf", details={"mesh": list(candidates[i][2][0]),
                                                                  "logical_dims": list(candidates[i][2][1])})
             for i in kept]
    return Frontier(plans, {"algorithm": "mesh-tf", "layouts": len(candidates), "scalars_replicated": len(scalars)})
