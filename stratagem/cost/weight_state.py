"""How an op's own weights are held across its data-parallel axes: the one decision that the cost
model, the simulator, the runtime and the reports all call (ZeRO-3, Rajbhandari et al. 2020, §5.3;
PyTorch's FSDP2 `fully_shard`).

    data-parallel axes of a weight   the mesh axes on which the op reads it whole (R) while its
                                     gradient is a partial sum (P): the devices along them compute
                                     on different samples with the same weight
    stored layout                    the read layout with every data-parallel axis turned into
                                     S(d), d the weight dim with the most local elements that the
                                     axes' product p divides (none: the weight stays replicated)

Under a configuration whose `state` is "sharded" or "sharded_kept", each owned weight that has a
stored layout is held in it: its weight, gradient and optimizer state take 1/p of the replicated
bytes; before the op's forward its p shards are all-gathered into the read layout (`gathers`);
the gradient, a partial sum over the axes, is reduce-scattered into the stored layout (it
replaces data parallelism's all-reduce); "sharded" frees the gathered weight after forward and
gathers it again for backward, "sharded_kept" keeps it from forward to backward. "offloaded" is
"sharded" with the shards in host memory (FSDP2's CPUOffloadPolicy): before each gather the
device copies its shard of the weight in from the host (`host_copies`), after the reduce-scatter
it copies its gradient's shard out, the optimizer steps on the host CPU; the device holds none of
the three between uses.

`can_shard_state` says which (op, configuration) the space offers the sharded states for: the op
owns a trainable weight with data-parallel axes, and no other op reads any weight it owns (a tied
weight reaches its other readers over an edge from the owner's resident copy, which sharding would
change; such ops keep their weights replicated).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stratagem.errors import ConfigError
from stratagem.ir import Graph, Role, dtype_bytes, owned_parameters
from stratagem.space import Configuration, Partial, Replicate, Shard
from stratagem.space.tensor_layout import TensorLayout


@dataclass(frozen=True)
class ShardedWeight:
    """One owned weight held sharded: its input position, the layout the op reads it in (the
    gathered weight), the layout it is held in, and the data-parallel axes that shard it."""
    position: int
    tensor: str
    read: TensorLayout
    stored: TensorLayout
    axes: tuple[int, ...]

    @property
    def shards(self) -> int:
        return math.prod(self.read.mesh_shape[a] for a in self.axes)

    @property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        """The device groups that gather (and reduce-scatter) it, all at once."""
        return self.read.axis_groups(self.axes)

    def read_bytes(self, graph: Graph) -> float:
        """Bytes of the gathered weight on one device (the op's read layout)."""
        spec = graph.tensors[self.tensor]
        return float(self.read.local_num_elements(spec.shape) * dtype_bytes(spec.dtype))


def data_parallel_axes(read: TensorLayout, gradient: TensorLayout) -> tuple[int, ...]:
    return tuple(a for a, (p, g) in enumerate(zip(read.placements, gradient.placements))
                 if isinstance(p, Replicate) and isinstance(g, Partial))


def stored_layout(read: TensorLayout, gradient: TensorLayout, shape: tuple[int, ...]) -> TensorLayout | None:
    """The layout a sharded weight is held in (the module's rule), or None when it cannot be."""
    axes = data_parallel_axes(read, gradient)
    if not axes or read.boxes is not None:
        return None
    p = math.prod(read.mesh_shape[a] for a in axes)
    local = read.local_shape(shape)
    fits = [d for d in range(len(shape)) if local[d] % p == 0 and shape[d] % (read.shard_degree(d) * p) == 0]
    if not fits:
        return None
    dim = max(fits, key=lambda d: (local[d], -d))
    placements = tuple(Shard(dim) if a in axes else q for a, q in enumerate(read.placements))
    return TensorLayout(read.first_device, read.mesh_shape, placements)


def shardable_weights(graph: Graph, layouts, op_name: str, config: Configuration) -> tuple[ShardedWeight, ...]:
    """The op's own trainable weights that would be held sharded under `config` (its state aside)."""
    op = graph.op(op_name)
    found = []
    for i in owned_parameters(graph, op):
        spec = graph.tensors[op.inputs[i]]
        if spec.role is not Role.WEIGHT:
            continue
        read = layouts.input_layout(op_name, config, i)
        gradient = layouts.input_layout(op_name, config, i, gradient=True)
        stored = stored_layout(read, gradient, spec.shape)
        if stored is not None:
            found.append(ShardedWeight(i, spec.name, read, stored, data_parallel_axes(read, gradient)))
    return tuple(found)


def sharded_weights(graph: Graph, layouts, op_name: str, config: Configuration) -> tuple[ShardedWeight, ...]:
    """The weights `config` holds sharded: none unless its state is a sharded one."""
    return shardable_weights(graph, layouts, op_name, config) if config.sharded_state else ()


def owns_tied_weight(graph: Graph, op_name: str) -> bool:
    """Whether another op reads a weight or buffer `op_name` owns."""
    op = graph.op(op_name)
    return any(len({c.name for c in graph.consumers.get(op.inputs[i], ())}) > 1
               for i in owned_parameters(graph, op))


def can_shard_state(graph: Graph, layouts, op_name: str, config: Configuration) -> bool:
    return not owns_tied_weight(graph, op_name) and bool(shardable_weights(graph, layouts, op_name, config))


def offered_states(offload: bool) -> tuple[str, ...]:
    """The weight states the space offers an op that can shard: the sharded ones, and "offloaded"
    with `offload` (searches ask for it, as it is slower than any other, when nothing fits)."""
    return ("replicated", "sharded", "sharded_kept") + (("offloaded",) if offload else ())


def with_states(graph: Graph, layouts, op_name: str, configs: tuple[Configuration, ...], offload: bool = False
                ) -> tuple[Configuration, ...]:
    """`configs` (replicated), each followed by its sharded states where the op may take them."""
    if owns_tied_weight(graph, op_name):
        return configs
    found = []
    for config in configs:
        found.append(config)
        if shardable_weights(graph, layouts, op_name, config):
            found.extend(config.with_state(s) for s in offered_states(offload)[1:])
    return tuple(found)


def check_state(graph: Graph, layouts, op_name: str, config: Configuration) -> None:
    """Refuse a sharded state where the op cannot take one (plan files, the cost model)."""
    if config.sharded_state and not can_shard_state(graph, layouts, op_name, config):
        raise ConfigError(f"op {op_name!r} cannot hold its weights sharded under {config.base}",
                          expected="a sharded state only for an op that owns a trainable weight it reads whole "
                                   "over a data-parallel axis (its gradient a partial sum there), read by no other op",
                          got=f"state {config.state!r}", hint="Give this op the state 'replicated'")
