"""The classic strategies as strategies (one configuration per op), for the baseline searches
(search.baselines), the expert strategies (search.expert), MCMC's starting points and FT's second
pass: each a function of the planning context, nothing priced or simulated here.

    data_parallel_strategy   every op splits its batch (sample) dim over all devices, or the
                             reduction that reads the batch (a mean loss); ops with neither replicate
    owt_strategy             Krizhevsky's one weird trick: data parallel but the fully-connected
                             layers, whose output features split
    model_parallel_strategy  each op whole on one device, contiguous runs balanced by compute time
    tensor_parallel_strategy Megatron-LM's layout on a (data, tensor) mesh: the batch split over the
                             data axis; over the tensor axis a fully-connected layer reading a whole
                             input splits its output features (column parallel), an op reading an
                             input split there follows the split (a linear: its reduction, row
                             parallel; attention: its heads), the rest replicate; with sequence
                             parallelism (torchtitan's default), the elementwise ops after a
                             row-parallel linear split the sequence instead (its partial sum
                             reduce-scattered), the ops reading them follow, and the next
                             column-parallel linear gathers its input
    mesh_tf_strategies       Mesh-TensorFlow's layouts: one mesh for every op, a logical dim split
                             the same way everywhere (TensorOpt §4.2); ops with no dims (scalars)
                             replicated over the mesh
"""

from __future__ import annotations

import itertools

from stratagem.cost.weight_state import can_shard_state
from stratagem.search.coarsen import derive_follower_config, is_follower_kind
from stratagem.space import Configuration, Level, Partial, Shard, layout, ordered_factorizations


def valid(analysis, config: Configuration) -> bool:
    """`config` splits every dim it names evenly and regularly."""
    for dim, k in config.degrees.items():
        if analysis.dim(dim).size % k or not analysis.can_split(dim, k):
            return False
    return layout(analysis, config).is_regular


def all_devices(ctx, dim: str | None) -> Configuration:
    return Configuration((Level(dim, ctx.num_devices),))


def batch_dim(analysis) -> str | None:
    for d in analysis.dims:
        if d.kind == "sample" and d.splittable:
            return d.name
    for d in analysis.dims:
        if d.is_reduction and d.splittable and analysis.addresses_sample_dim(d.name):
            return d.name
    return None


def split_or_replicate(ctx, op_name: str, dim: str | None) -> Configuration:
    analysis = ctx.model.analyses[op_name]
    if dim is not None:
        config = all_devices(ctx, dim)
        if valid(analysis, config):
            return config
    return all_devices(ctx, None)


def data_parallel_strategy(ctx) -> dict[str, Configuration]:
    return {op.name: split_or_replicate(ctx, op.name, batch_dim(ctx.model.analyses[op.name]))
            for op in ctx.graph.ops}


def with_sharded_state(ctx, strategy: dict[str, Configuration], state: str = "sharded") -> dict[str, Configuration]:
    """`strategy` with every op that may hold its weights sharded (cost.weight_state) in `state`."""
    graph, layouts = ctx.graph, ctx.model.layouts
    return {op: config.with_state(state) if can_shard_state(graph, layouts, op, config) else config
            for op, config in strategy.items()}


FULLY_CONNECTED = ("linear", "addmm", "mm", "matmul")


def tensor_parallel_strategy(ctx, tensor: int, sequence_parallel: bool = False) -> dict[str, Configuration]:
    """Megatron-LM's intra-layer model parallelism (Shoeybi et al. 2019, §3) over a `tensor`-wide
    inner mesh axis, data parallelism over the outer one (module docstring). Each op in program
    order: follow an input split over the tensor axis (search.coarsen.derive_follower_config),
    else column-parallel for a fully-connected layer, else replicated over the tensor axis. With
    `sequence_parallel` (Korthikanti et al. 2022), an elementwise op reading a row-parallel
    linear's partial sum splits the outermost index the data axis leaves (the sequence: a
    reduce-scatter where Megatron-LM without it all-reduces), and so do the ops after it up to the
    next fully-connected layer, which gathers its input and splits its output features."""
    data = ctx.num_devices // tensor
    strategy: dict[str, Configuration] = {}
    for op in ctx.graph.ops:
        analysis = ctx.model.analyses[op.name]
        batch = batch_dim(analysis)
        found = _following(ctx, op, strategy, tensor, sequence_parallel)
        if found is None and op.kind in FULLY_CONNECTED:
            params = [d.name for d in analysis.dims if d.kind == "parameter" and d.splittable]
            found = _checked(analysis, Configuration((Level(batch, data), Level(params[0], tensor)))) if params else None
        strategy[op.name] = found or _checked(analysis, Configuration((Level(batch, data), Level(None, tensor)))) \
            or Configuration((Level(None, ctx.num_devices),))
    return strategy


def _following(ctx, op, strategy: dict[str, Configuration], tensor: int, sequence_parallel: bool
               ) -> Configuration | None:
    """The configuration that reads, as it is laid out, the latest input split over the tensor
    axis (or, with `sequence_parallel`, summed partially there and read by an elementwise op)."""
    graph, data = ctx.graph, ctx.num_devices // tensor
    for t in sorted((t for t in op.inputs if t in graph.producer and graph.producer[t].name in strategy),
                    key=lambda t: -graph.op_index[graph.producer[t].name]):
        source = graph.producer[t].name
        config = strategy[source]
        axis = _tensor_axis(config, data, tensor)
        placements = ctx.model.layout(source, config).outputs
        if axis is None:
            continue
        scatter = sequence_parallel and isinstance(placements[axis], Partial) \
            and is_follower_kind(op, ctx.model.analyses)
        if not scatter and not isinstance(placements[axis], Shard):
            continue
        if op.kind in FULLY_CONNECTED:          # row parallel: the reduction that reads the split
            row = _row_parallel(ctx, op, t, placements[axis], data, tensor)
            if row is not None or sequence_parallel:
                return row                      # (None: column parallel, gathering the sequence)
        follower = derive_follower_config(graph, ctx.model.analyses, op, t, config, placements, scatter)
        found = _tensor_axis(follower, data, tensor)
        if found is not None and follower.levels[found].dim is not None:
            return follower
    return None


def _tensor_axis(config: Configuration, data: int, tensor: int) -> int | None:
    """Which of `config`'s levels is the (data, tensor) mesh's tensor axis: the second, or the only
    one when the data axis has one device (a level of size 1 is dropped); None when the
    configuration is not on that mesh."""
    levels = config.levels
    if len(levels) == 2 and levels[0].size == data and levels[1].size == tensor:
        return 1
    if len(levels) == 1 and data == 1 and levels[0].size == tensor:
        return 0
    return None


def _row_parallel(ctx, op, tensor_name: str, placement, data: int, tensor: int) -> Configuration | None:
    analysis = ctx.model.analyses[op.name]
    index = op.inputs.index(tensor_name)
    for d in analysis.dims:
        if d.is_reduction and analysis.can_split(d.name, tensor) \
                and analysis.split(d.name, tensor).placements[index] == str(placement):
            return _checked(analysis, Configuration((Level(batch_dim(analysis), data), Level(d.name, tensor))))
    return None


def _checked(analysis, config: Configuration) -> Configuration | None:
    return config if valid(analysis, config) else None


def owt_strategy(ctx) -> dict[str, Configuration]:
    """Krizhevsky's one weird trick: data parallel everywhere but the fully-connected layers,
    which split their output features (model parallel). Other ops with weights (convolutions,
    batch norm's affine) stay data parallel."""
    strategy = data_parallel_strategy(ctx)
    for op in ctx.graph.ops:
        analysis = ctx.model.analyses[op.name]
        params = [d.name for d in analysis.dims if d.kind == "parameter" and d.splittable]
        if params and op.kind in FULLY_CONNECTED:
            config = all_devices(ctx, params[0])
            if valid(analysis, config):
                strategy[op.name] = config
    return strategy


def model_parallel_strategy(ctx) -> dict[str, Configuration]:
    ops = [op.name for op in ctx.graph.ops]
    times = [ctx.model.op_cost(name, Configuration((), 0)).compute_time_s for name in ops]
    return {name: Configuration((), device) for name, device in zip(ops, balanced_blocks(times, ctx.num_devices))}


def balanced_blocks(times: list[float], parts: int) -> list[int]:
    """Device of each item: contiguous runs with about equal total time, in order."""
    total = float(sum(times)) or 1.0
    out, acc = [], 0.0
    for t in times:
        out.append(min(int(acc / total * parts), parts - 1))
        acc += t
    return out


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
            yield (shape, chosen), {op.name: _mesh_tf_config(ctx, op.name, by_op.get(op.name, {}), chosen, shape)
                                    for op in ctx.graph.ops}


def _mesh_tf_config(ctx, op: str, dims_of: dict[int, str], chosen, shape) -> Configuration:
    """The op's configuration under one Mesh-TF layout: each axis splits the op's dim of the
    axis's logical dim, or replicates (also where that split is not valid, and for scalars)."""
    replicated = Configuration(tuple(Level(None, s) for s in shape))
    analysis = ctx.model.analyses[op]
    if not analysis.dims:
        return replicated
    config = Configuration(tuple(Level(dims_of.get(c) if c is not None else None, size)
                                 for c, size in zip(chosen, shape)))
    return config if valid(analysis, config) else replicated
