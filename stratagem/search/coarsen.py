"""Graph coarsening (Tofu §5.1): groups of ops that choose one configuration together.

Two rules, each restricting the space to the configurations real systems use:

1. Followers. An elementwise or shape-only op (relu, add, dropout, reshape, transpose, ...) takes the
   partition of its input (Tofu: "the input and output tensors of an element-wise operator should
   always be partitioned identically"). It joins the group of the op producing that input (if it
   has several: the latest-produced of those with the output's own shape, so that x + pos[:T]
   follows x and not the broadcast positional table; if every one broadcasts, as T5's
   masked_fill(bias[1, H, L, S], mask[B, 1, L, S]), it leads a group of its own), and its
   configuration is derived from the group's (`derive_follower_config`): per mesh axis, an input
   S(d) makes it split the index that reads dim d (if none does, it replicates that axis: an
   all-gather); R makes it replicate; P(sum) makes it replicate too (an all-reduce: elementwise ops
   do not pass partial sums through), or, in the group's scattering variant (`scatter=True`), split
   the outermost index no other axis splits (a reduce-scatter into a shard, as Megatron-LM's
   sequence parallelism does after a row-parallel matmul; `search.space.group_variants` offers
   both where they differ).
2. Shared weights. Ops reading the same weight with identical signatures (unrolled RNN timesteps)
   share one configuration (Tofu: "merging unrolled timesteps").

A group's node cost per configuration is the sum of its members' op costs and the re-scheduling
between members; edges between groups become the search's edges.
"""

from __future__ import annotations

from dataclasses import dataclass

from stratagem.ir import Graph, Op, Role
from stratagem.space import Configuration, Level, Partial, Replicate, Shard, layout
from stratagem.tdl.graphops import AnalysisCache, analysis_key
from stratagem.tdl.library import LIBRARY



@dataclass(frozen=True)
class Group:
    anchor: str                    # op whose configuration the group chooses
    members: tuple[str, ...]       # anchor first, then the rest in topological order
    rule: str                      # "single" | "followers" | "shared-weights"


def is_follower_kind(op: Op, analyses: AnalysisCache) -> bool:
    if op.kind in LIBRARY and LIBRARY[op.kind].follows:      # shape and copy ops: the op's record
        return True
    analysis = analyses[op.name]
    return analysis.is_elementwise and not any(
        d.kind == "parameter" for d in analysis.dims)


def coarsen(graph: Graph, analyses: AnalysisCache | None = None, followers: bool = True,
            shared_weights: bool = True) -> tuple[Group, ...]:
    analyses = analyses or AnalysisCache(graph)
    group_of: dict[str, str] = {}        # op -> anchor
    rule: dict[str, str] = {}
    if shared_weights:
        _share_weights(graph, analyses, group_of, rule)
    for op in graph.ops:
        if op.name in group_of:
            continue
        source = _follower_source(graph, op, analyses) if followers else None
        if source is not None:
            anchor = group_of[source]
            group_of[op.name] = anchor
            rule[anchor] = "followers" if rule.get(anchor, "single") == "single" else rule[anchor]
        else:
            group_of[op.name] = op.name
            rule.setdefault(op.name, "single")
    members: dict[str, list[str]] = {}
    for op in graph.ops:
        members.setdefault(group_of[op.name], []).append(op.name)
    return tuple(Group(anchor, tuple(ms), rule.get(anchor, "single")) for anchor, ms in members.items())


def _share_weights(graph: Graph, analyses: AnalysisCache, group_of: dict[str, str],
                   rule: dict[str, str]) -> None:
    by_weight: dict[tuple, list[str]] = {}
    for op in graph.ops:
        weights = tuple(t for t in op.inputs if graph.tensors[t].role is Role.WEIGHT)
        if weights:
            by_weight.setdefault((weights, analysis_key(graph, op)), []).append(op.name)
    for names in by_weight.values():
        if len(names) > 1 and not any(n in group_of for n in names):
            for n in names:
                group_of[n] = names[0]
            rule[names[0]] = "shared-weights"


def _follower_source(graph: Graph, op: Op, analyses: AnalysisCache) -> str | None:
    if not is_follower_kind(op, analyses):
        return None
    inputs = [t for t in op.inputs if graph.tensors[t].role is Role.ACTIVATION and t in graph.producer]
    if not inputs:
        return None
    out_shape = graph.tensors[op.outputs[0]].shape
    whole = [t for t in inputs if graph.tensors[t].shape == out_shape]
    if not whole and len(inputs) > 1:
        return None         # every input broadcasts: the output's partition is its own choice
    return max((graph.producer[t].name for t in whole or inputs), key=lambda name: graph.op_index[name])


def derive_follower_config(graph: Graph, analyses: AnalysisCache, follower: Op, tensor: str,
                           source: Configuration, source_placements: tuple, scatter: bool = False
                           ) -> Configuration:
    """The follower's configuration that reads `tensor` as laid out by its producer (see rule 1);
    with `scatter`, a partial sum is reduce-scattered into a split of the follower where one is
    valid (and all-reduced otherwise)."""
    analysis = analyses[follower.name]
    index = follower.inputs.index(tensor)
    dims = [_dim_reading(analysis, index, placement, source.degree(level.dim) if level.dim else 1)
            for level, placement in zip(source.levels, source_placements)]
    plain = _with_dims(source, dims)
    if not _valid(analysis, plain):
        return Configuration((Level(None, source.num_devices),), source.first_device)
    if not scatter or not any(isinstance(p, Partial) for p in source_placements):
        return plain
    scattered = _with_dims(source, _scattered(analysis, dims, source.levels, source_placements))
    return scattered if _valid(analysis, scattered) else plain


def _with_dims(source: Configuration, dims: list) -> Configuration:
    return Configuration(tuple(Level(d, level.size) for d, level in zip(dims, source.levels)),
                         source.first_device)


def _scattered(analysis, dims: list, levels: tuple, placements: tuple) -> list:
    """`dims` with each axis that holds a partial sum splitting the outermost index of the
    follower that no other axis splits and that divides evenly (None where none does)."""
    out = list(dims)
    for axis, (level, placement) in enumerate(zip(levels, placements)):
        if not isinstance(placement, Partial):
            continue
        out[axis] = next((d.name for d in analysis.dims if not d.is_reduction and d.name not in out
                          and d.size % level.size == 0 and analysis.can_split(d.name, level.size)), None)
    return out


def _dim_reading(analysis, input_index: int, placement, degree: int) -> str | None:
    if not isinstance(placement, Shard):
        return None
    for d in analysis.dims:
        if d.is_reduction or not analysis.can_split(d.name, degree):
            continue
        if analysis.split(d.name, degree).placements[input_index] == str(placement):
            return d.name
    return None


def _valid(analysis, config: Configuration) -> bool:
    for dim, k in config.degrees.items():
        if analysis.dim(dim).size % k or not analysis.can_split(dim, k):
            return False
    return layout(analysis, config).is_regular


__all__ = ["Group", "coarsen", "derive_follower_config", "is_follower_kind",
           "Partial", "Replicate"]
