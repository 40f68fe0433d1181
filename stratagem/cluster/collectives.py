"""Collective times by the alpha-beta-gamma model on the links a group's algorithm actually uses.

n is the full logical buffer (nccl-tests' S): the gathered output of all-gather, the un-reduced
input of reduce-scatter, the vector of all-reduce, what each rank sends in all-to-all.
For an algorithm with `steps` latency steps, per-rank volume v(p)*n and reduction r(p)*n, on a
protocol (base latency b, latency scale s, bandwidth factor f):

    t = b + s * steps * alpha + v(p) * n / (f * B) + r(p) * n * gamma

  algorithm (`flat_algorithms`)       steps        v(p)          r(p)      flows
  ring all-reduce                     2(p-1)       2(p-1)/p      (p-1)/p   ring channels
  ring all-gather / reduce-scatter    p-1          (p-1)/p       0/(p-1)/p ring channels
  double binary tree all-reduce       2 depth      2             1         tree up edges, 1/2 each
  chain broadcast (pipelined)         p-1          1             0         chain from the root
  tree broadcast                      depth        1             0         tree down edges
  pairwise all-to-all                 p-1          (p-1)/p       0         all pairs, 1/(p-1) each
  send/recv                           1            1             0         src -> dst

alpha is the largest route latency among the flows; B = min over links l of bandwidth_l / load_l,
where load_l sums the weights of every flow routed over l, over *all* groups running at once
(`bottleneck`): concurrent groups that share a NIC or a PCIe switch divide it (TensorOpt §3.2);
groups on separate links do not slow each other. With several groups the worst alpha and the
worst B are combined.

Hierarchical (`hierarchical_phases`), for groups spread evenly over N >= 2 nodes with m >= 2
members each (NCCL's and Megatron's two-level pattern; the reference sheet's formula):
all-reduce = intra-node reduce-scatter(n) + inter-node all-reduce(n/m) on each of the m rails +
intra-node all-gather(n); all-gather = inter all-gather(n/m) + intra all-gather(n);
reduce-scatter = intra reduce-scatter(n) + inter reduce-scatter(n/m). Each phase takes its best
flat algorithm and protocol. `estimate` returns the minimum over everything, as NCCL's tuner does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol as TypingProtocol

from stratagem.cluster.patterns import (
    Flow, chain_flows, pairwise_flows, reverse, ring_flows, tree_edges,
)
from stratagem.cluster.spec import Protocol
from stratagem.errors import ConfigError

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")
Groups = tuple[tuple[int, ...], ...]


class TopologyView(TypingProtocol):
    def route_ids(self, src: int, dst: int) -> tuple[int, ...]: ...
    def route_latency_s(self, src: int, dst: int) -> float: ...
    def link_bandwidth(self, link: int) -> float: ...
    def node_of(self, device: int) -> int: ...
    def ring_channels(self, group: tuple[int, ...]) -> tuple[tuple[tuple[int, ...], float], ...]: ...


@dataclass(frozen=True)
class AlgorithmParams:
    name: str
    steps: int
    hop_latency_s: float
    bandwidth_bytes_per_s: float
    volume_factor: float
    reduction_factor: float

    def time_s(self, num_bytes: float, protocol: Protocol, gamma_s_per_byte: float) -> float:
        return (protocol.base_latency_s + protocol.latency_scale * self.steps * self.hop_latency_s
                + self.volume_factor * num_bytes / (protocol.bandwidth_factor * self.bandwidth_bytes_per_s)
                + self.reduction_factor * num_bytes * gamma_s_per_byte)


@dataclass(frozen=True)
class Phase:
    kind: str
    bytes_fraction: float
    options: tuple[AlgorithmParams, ...]


@dataclass(frozen=True)
class CollectivePlan:
    flat: tuple[AlgorithmParams, ...]
    hierarchical: tuple[Phase, ...] | None


@dataclass(frozen=True)
class Estimate:
    time_s: float
    algorithm: str
    protocol: str
    source: str = "model"        # "model" or "table"


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ConfigError("unknown collective", expected=f"one of {KINDS}", got=repr(kind))


def bottleneck(view: TopologyView, flows_per_group: Sequence[Sequence[Flow]]) -> tuple[float, float]:
    """(worst hop latency, worst bottleneck bandwidth) of groups whose flows run at the same time."""
    load: dict[int, float] = {}
    for flows in flows_per_group:
        for a, b, w in flows:
            for link in view.route_ids(a, b):
                load[link] = load.get(link, 0.0) + w
    bandwidth, latency = float("inf"), 0.0
    for flows in flows_per_group:
        for a, b, _ in flows:
            latency = max(latency, view.route_latency_s(a, b))
            for link in view.route_ids(a, b):
                bandwidth = min(bandwidth, view.link_bandwidth(link) / load[link])
    return latency, bandwidth


def _params(view: TopologyView, name: str, flows: Sequence[Sequence[Flow]], steps: int,
            volume: float, reduction: float) -> AlgorithmParams:
    latency, bandwidth = bottleneck(view, flows)
    return AlgorithmParams(name, steps, latency, bandwidth, volume, reduction)


def _parts(view: TopologyView, group: Sequence[int]) -> list[list[int]]:
    by_node: dict[int, list[int]] = {}
    for d in sorted(group):
        by_node.setdefault(view.node_of(d), []).append(d)
    return [by_node[n] for n in sorted(by_node)]


def flat_algorithms(view: TopologyView, kind: str, groups: Groups) -> tuple[AlgorithmParams, ...]:
    p = len(groups[0])
    if kind == "send_recv":
        return (_params(view, "direct", [((g[0], g[1], 1.0),) for g in groups], 1, 1.0, 0.0),)
    if kind == "all_to_all":
        return (_params(view, "pairwise", [pairwise_flows(g) for g in groups], p - 1, (p - 1) / p, 0.0),)
    channels = [view.ring_channels(g) for g in groups]
    trees = [tree_edges(_parts(view, g)) for g in groups]
    depth = max(d for _, d in trees)
    if kind == "broadcast":
        chains = [chain_flows(_rotate(c[0][0], min(g))) for c, g in zip(channels, groups)]
        return (_params(view, "chain", chains, p - 1, 1.0, 0.0),
                _params(view, "tree", [reverse(f) for f, _ in trees], depth, 1.0, 0.0))
    rings = [ring_flows(c) for c in channels]
    if kind == "all_reduce":
        return (_params(view, "ring", rings, 2 * (p - 1), 2 * (p - 1) / p, (p - 1) / p),
                _params(view, "tree", [f for f, _ in trees], 2 * depth, 2.0, 1.0))
    reduction = (p - 1) / p if kind == "reduce_scatter" else 0.0
    return (_params(view, "ring", rings, p - 1, (p - 1) / p, reduction),)


def _rotate(order: Sequence[int], root: int) -> tuple[int, ...]:
    i = list(order).index(root)
    return tuple(order[i:]) + tuple(order[:i])


_HIERARCHY = {
    "all_reduce": (("reduce_scatter", "intra", False), ("all_reduce", "inter", True),
                   ("all_gather", "intra", False)),
    "all_gather": (("all_gather", "inter", True), ("all_gather", "intra", False)),
    "reduce_scatter": (("reduce_scatter", "intra", False), ("reduce_scatter", "inter", True)),
}


def hierarchical_phases(view: TopologyView, kind: str, groups: Groups) -> tuple[Phase, ...] | None:
    if kind not in _HIERARCHY:
        return None
    split = [_parts(view, g) for g in groups]
    sizes = {len(part) for parts in split for part in parts}
    if len(sizes) != 1 or min(len(parts) for parts in split) < 2 or sizes == {1}:
        return None
    m = sizes.pop()
    intra = tuple(tuple(part) for parts in split for part in parts)
    inter = tuple(tuple(part[j] for part in parts) for parts in split for j in range(m))
    return tuple(Phase(phase_kind, 1.0 / m if scaled else 1.0,
                       flat_algorithms(view, phase_kind, intra if level == "intra" else inter))
                 for phase_kind, level, scaled in _HIERARCHY[kind])


def plan_collective(view: TopologyView, kind: str, groups: Groups) -> CollectivePlan:
    return CollectivePlan(flat_algorithms(view, kind, groups), hierarchical_phases(view, kind, groups))


def _best(options: Sequence[AlgorithmParams], num_bytes: float, protocols: Sequence[Protocol],
          gamma: float) -> tuple[float, str, str]:
    return min((a.time_s(num_bytes, p, gamma), a.name, p.name) for a in options for p in protocols)


def estimate(plan: CollectivePlan, num_bytes: float, protocols: Sequence[Protocol],
             gamma_s_per_byte: float) -> Estimate:
    best = Estimate(*_best(plan.flat, num_bytes, protocols, gamma_s_per_byte))
    if plan.hierarchical is not None:
        parts = [_best(phase.options, num_bytes * phase.bytes_fraction, protocols, gamma_s_per_byte)
                 for phase in plan.hierarchical]
        total = sum(t for t, _, _ in parts)
        if total < best.time_s:
            names = "+".join(f"{a}/{p}" for _, a, p in parts)
            best = Estimate(total, f"hierarchical({names})", "mixed")
    return best
