"""Producer flags in FT's cost problem: buffers several consumers keep, counted exactly.

cost.sharing: a tensor t that its producer p does not keep for backward and two or more consumers
do is one buffer for every consumer reading it as p lays it out. Edge by edge that is not additive
(who shares depends on every consumer's configuration), so the group holding p carries one flag per
such tensor it produces (the `MAX_FLAGS_PER_GROUP` largest), as part of its configuration index:

    k' = k * 2^n + f        k: the group's configuration, f: n bits, bit i for shared tensor t_i
    bit set    the group pays |t_i|_p (node memory, `producer_bytes` under k); every keeper reading
               t_i as it is gets it back (its edge's memory, or the group's own for a keeper inside
               it); t_i's buffer is kept, so no edge of t_i counts it as transient
    bit clear  every keeper pays its own (the cost model's edge costs, unchanged)

Either value only ever overcharges, and for every strategy one of them is exact (cost.sharing), so
the least over f, which FT's frontier keeps (the flag changes memory, never time), is the exact
memory. Groups without shared tensors keep their configurations (2^0 = 1); edges not touching a
flagged tensor repeat their tables along the flags (`np.repeat`, index k * F + f).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from stratagem.cost.sharing import SharedTensor, producer_bytes, reads_as_is
from stratagem.cost.transient import input_transient_table
from stratagem.space import Configuration, Edge


MAX_FLAGS_PER_GROUP = 3     # 2^3 flag values per configuration at most


def flagged_tensors(model, groups, group_of: Mapping[str, int]) -> tuple[tuple[SharedTensor, ...], ...]:
    """Per group, the shared tensors (cost.sharing) its members produce: one flag bit each, for
    the `MAX_FLAGS_PER_GROUP` largest. A group merging many steps (an unrolled RNN's shared-weight
    group) may produce dozens, and the flag values grow as 2^n; the unflagged ones keep the cost
    model's edge prices (each keeper pays its own): FT overcharges them, never undercharges, and
    every plan's reported memory counts them exactly (cost.sharing)."""
    found: list[list[SharedTensor]] = [[] for _ in groups]
    for shared in model.shared_tensors:
        found[group_of[shared.producer]].append(shared)
    return tuple(tuple(sorted(f, key=lambda s: -model.graph.tensors[s.tensor].num_bytes)[:MAX_FLAGS_PER_GROUP]) for f in found)


def node_flag_memory(model, flags: Sequence[SharedTensor], members: Mapping[str, Sequence[Configuration]],
                     num_configs: int) -> np.ndarray:
    """[K, 2^n]: the memory each flag value adds to the group's configurations: the producer's
    buffer, less what keepers inside the group reading it as it is no longer pay."""
    extra = np.zeros((num_configs, 1 << len(flags)))
    for bit, shared in enumerate(flags):
        for k in range(num_configs):
            src = members[shared.producer][k]
            size = producer_bytes(model, shared, src)
            inside = sum(reads_as_is(model, Edge(shared.tensor, shared.producer, q), src, members[q][k])
                         for q in shared.keepers if q in members)
            extra[k, _with_bit(bit, len(flags))] += size * (1 - inside)
    return extra


def expand_nodes(values: np.ndarray, flags: int, extra: np.ndarray | None = None) -> np.ndarray:
    """[K] -> [K * F] (index k * F + f), plus the flags' memory when given."""
    out = np.repeat(values, flags)
    return out + extra.ravel() if extra is not None else out


def expand_edge(model, edge: Edge, tables: tuple[np.ndarray, np.ndarray, np.ndarray],
                src_flags: Sequence[SharedTensor], dst_flags: Sequence[SharedTensor],
                src_configs, dst_configs, option_names) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An edge's [R, K_s, K_d] memory and time tables and [3, R, K_s, K_d] transient phases
    (cost.transient) on the flagged indices K_s * F_s, K_d * F_d; only a flag on the edge's own
    tensor changes its values."""
    fs, fd = 1 << len(src_flags), 1 << len(dst_flags)
    mem, time = (np.repeat(np.repeat(t, fs, axis=1), fd, axis=2) for t in tables[:2])
    transient = np.repeat(np.repeat(tables[2], fs, axis=2), fd, axis=3)
    bit = next((i for i, s in enumerate(src_flags) if s.tensor == edge.tensor), None)
    if bit is None:
        return mem, time, transient
    keeps = edge.dst_op in src_flags[bit].keepers
    costs = model.edge_costs(edge.tensor, edge.src_op, src_configs, edge.dst_op, dst_configs)
    kept = input_transient_table(model, edge, src_configs, dst_configs, costs, option_names, True)
    flagged = _with_bit(bit, len(src_flags))
    for ks, src in enumerate(src_configs):
        size = producer_bytes(model, src_flags[bit], src)
        for kd, dst in enumerate(dst_configs):
            names = option_names[ks * len(dst_configs) + kd]
            credit = size if keeps and reads_as_is(model, edge, src, dst) else 0.0
            for f in flagged:
                rows = slice(ks * fs + f, ks * fs + f + 1)
                cols = slice(kd * fd, (kd + 1) * fd)
                mem[:len(names), rows, cols] -= credit
                transient[:, :, rows, cols] = kept[:, :, ks, kd, None, None]
    return mem, time, transient


def edge_flag_key(edge: Edge, src_flags: Sequence[SharedTensor], dst_flags: Sequence[SharedTensor]) -> tuple:
    """What `expand_edge` reads of the flags beside the edge's tables: structurally equal edges
    (equal tables, search.space's edge key) with equal flag keys expand alike (repeated layers)."""
    bit = next((i for i, s in enumerate(src_flags) if s.tensor == edge.tensor), None)
    keeps = bit is not None and edge.dst_op in src_flags[bit].keepers
    return len(src_flags), len(dst_flags), bit, keeps


def flags_of_strategy(model, flags: Sequence[SharedTensor], kept: frozenset[str]) -> int:
    """The flag value that is exact for a strategy whose kept producer buffers are `kept`
    (cost.sharing.kept_producer_buffers)."""
    return sum(1 << bit for bit, shared in enumerate(flags) if shared.tensor in kept)


def _with_bit(bit: int, n: int) -> list[int]:
    """Every flag value of n bits with `bit` set."""
    return [f for f in range(1 << n) if f >> bit & 1]


__all__ = ["edge_flag_key", "expand_edge", "expand_nodes", "flagged_tensors", "flags_of_strategy", "node_flag_memory"]
