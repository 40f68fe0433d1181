"""The classic strategies, each one plan (TensorOpt §5.1 and FlexFlow §8.1 compare against them).

    data-parallel   every op splits its batch (sample) dim over all devices, or the reduction
                    that reads the batch (a mean loss); ops with neither replicate
    model-parallel  layers to devices: each op whole on one device, contiguous runs of ops in
                    topological order, balanced by compute time (`_balanced_blocks`)
    owt             Krizhevsky's one weird trick: data-parallel everywhere except the fully-connected
                    layers (linear, addmm, mm, matmul), whose output features split: model-parallel
    optcnn          a single objective: the min-time end of the frontier (TensorOpt: OptCNN "always
                    finds the point with the shortest per-iteration time")
    tofu-like       every tensor split across all devices, no replication (TensorOpt simulates
                    ToFu so): FT over the space without replicated axes, its min-time end
    mesh-tf         Mesh-TensorFlow's restricted space: one mesh for every op, a logical dim split
                    the same way everywhere (TensorOpt §4.2); the frontier of that space, its
                    min-time end (`mesh_tf_frontier` gives the whole frontier)
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np

from stratagem.plan import Frontier, Plan
from stratagem.search.frontier import Frontier as RawFrontier
from stratagem.search.space import FT_SPACE, additive_cost
from stratagem.space import Configuration, Level, SpaceOptions, layout, ordered_factorizations


def _valid(analysis, config: Configuration) -> bool:
    for dim, k in config.degrees.items():
        if analysis.dim(dim).size % k or not analysis.can_split(dim, k):
            return False
    return layout(analysis, config).is_regular


def _all_devices(ctx, dim: str | None) -> Configuration:
    return Configuration((Level(dim, ctx.num_devices),))


def _batch_dim(analysis) -> str | None:
    for d in analysis.dims:
        if d.kind == "sample" and d.splittable:
            return d.name
    for d in analysis.dims:
        if d.is_reduction and d.splittable and analysis.addresses_sample_dim(d.name):
            return d.name
    return None


def _split_or_replicate(ctx, op_name: str, dim: str | None) -> Configuration:
    analysis = ctx.model.analyses[op_name]
    if dim is not None:
        config = _all_devices(ctx, dim)
        if _valid(analysis, config):
            return config
    return _all_devices(ctx, None)


def data_parallel_strategy(ctx) -> dict[str, Configuration]:
    return {op.name: _split_or_replicate(ctx, op.name, _batch_dim(ctx.model.analyses[op.name]))
            for op in ctx.graph.ops}


def data_parallel(ctx) -> Plan:
    from stratagem.search.planner import make_plan
    return make_plan(ctx, data_parallel_strategy(ctx), "data-parallel")


def owt(ctx) -> Plan:
    from stratagem.search.planner import make_plan
    return make_plan(ctx, owt_strategy(ctx), "owt")


FULLY_CONNECTED = ("linear", "addmm", "mm", "matmul")


def owt_strategy(ctx) -> dict[str, Configuration]:
    """Krizhevsky's one weird trick: data parallel everywhere but the fully-connected layers,
    which split their output features (model parallel). Other ops with weights (convolutions,
    batch norm's affine) stay data parallel."""
    strategy = data_parallel_strategy(ctx)
    for op in ctx.graph.ops:
        analysis = ctx.model.analyses[op.name]
        params = [d.name for d in analysis.dims if d.kind == "parameter" and d.splittable]
        if params and op.kind in FULLY_CONNECTED:
            config = _all_devices(ctx, params[0])
            if _valid(analysis, config):
                strategy[op.name] = config
    return strategy


def model_parallel(ctx) -> Plan:
    from stratagem.search.planner import make_plan
    ops = [op.name for op in ctx.graph.ops]
    times = [ctx.model.op_cost(name, Configuration((), 0)).compute_time_s for name in ops]
    blocks = _balanced_blocks(times, ctx.num_devices)
    strategy = {name: Configuration((), device) for name, device in zip(ops, blocks)}
    return make_plan(ctx, strategy, "model-parallel")


def _balanced_blocks(times: list[float], parts: int) -> list[int]:
    """Device of each item: contiguous runs with about equal total time, in order."""
    total = float(sum(times)) or 1.0
    out, acc = [], 0.0
    for t in times:
        out.append(min(int(acc / total * parts), parts - 1))
        acc += t
    return out


def optcnn(ctx) -> Plan:
    """OptCNN minimizes its cost model's time: the frontier's additive (Eq. 3) min-time end."""
    from stratagem.search.planner import frontier
    return replace(frontier(ctx.graph, ctx.cluster, ctx=ctx)[-1], algorithm="optcnn")


def tofu_like(ctx) -> Plan:
    from stratagem.search.planner import frontier
    space = SpaceOptions(allow_fewer_devices=False, allow_replicate=False, max_axes=FT_SPACE.max_axes)
    front = frontier(ctx.graph, ctx.cluster, ctx=ctx, space=space)
    return replace(front.min_time, algorithm="tofu-like")


# ---- Mesh-TensorFlow -----------------------------------------------------------------------------

def logical_dims(ctx) -> dict[tuple[str, str], int]:
    """Class of every (op, dim): an op's index and every tensor dim it addresses as itself (x[b, k]
    joins b with x's dim 0) are one logical dim, as a Mesh-TensorFlow dim name would be."""
    graph, analyses = ctx.graph, ctx.model.analyses
    parent: dict[tuple, tuple] = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a, b):
        parent[find(a)] = find(b)

    for op in graph.ops:
        analysis = analyses[op.name]
        for d in analysis.dims:
            node = ("op", op.name, d.name)
            find(node)
            position = analysis.output_dim_index(d.name)
            if position is not None:
                for t in op.outputs:
                    union(node, ("tensor", t, position))
            for position, tensor_dim in analysis.direct_input_dims(d.name):
                union(node, ("tensor", op.inputs[position], tensor_dim))
    classes: dict[tuple, int] = {}
    out = {}
    for op in graph.ops:
        for d in analyses[op.name].dims:
            root = find(("op", op.name, d.name))
            out[(op.name, d.name)] = classes.setdefault(root, len(classes))
    return out


def mesh_tf_strategies(ctx, max_axes: int = 2):
    """Every Mesh-TensorFlow layout: a mesh shape and a distinct logical dim (or none) per axis."""
    classes = logical_dims(ctx)
    names = sorted(set(classes.values()))
    by_op: dict[str, dict[int, str]] = {}
    for (op, dim), c in classes.items():
        by_op.setdefault(op, {})[c] = dim
    for shape in ordered_factorizations(ctx.num_devices, max_axes):
        for chosen in itertools.product([None, *names], repeat=len(shape)):
            used = [c for c in chosen if c is not None]
            if len(set(used)) != len(used):
                continue
            strategy = {}
            for op in ctx.graph.ops:
                analysis = ctx.model.analyses[op.name]
                levels = tuple(Level(by_op.get(op.name, {}).get(c) if c is not None else None, size)
                               for c, size in zip(chosen, shape))
                config = Configuration(levels)
                if not _valid(analysis, config):
                    config = Configuration(tuple(Level(None, s) for s in shape))
                strategy[op.name] = config
            yield (shape, chosen), strategy


def mesh_tf_frontier(ctx) -> Frontier:
    from stratagem.search.planner import make_plan
    seen, candidates = set(), []
    for key, strategy in mesh_tf_strategies(ctx):
        signature = tuple(sorted((op, str(c)) for op, c in strategy.items()))
        if signature in seen:
            continue
        seen.add(signature)
        candidates.append((additive_cost(ctx.model, strategy), strategy, key))
    mems = np.array([c[0][0] for c in candidates])
    times = np.array([c[0][1] for c in candidates])
    reduced = RawFrontier.reduce(mems, times, list(range(len(candidates))))
    plans = [make_plan(ctx, candidates[i][1], "mesh-tf",
                       details={"mesh": list(candidates[i][2][0]), "logical_dims": list(candidates[i][2][1])})
             for i in reduced.payload]
    return Frontier(plans, {"algorithm": "mesh-tf", "layouts": len(candidates)})


def mesh_tf(ctx) -> Plan:
    return replace(mesh_tf_frontier(ctx).min_time, algorithm="mesh-tf")


BASELINES = {"data-parallel": data_parallel, "model-parallel": model_parallel, "owt": owt,
             "optcnn": optcnn, "tofu-like": tofu_like, "mesh-tf": mesh_tf}
