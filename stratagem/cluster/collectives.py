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
(`bottleneck`, which applies cluster.usage's rule): concurrent groups that share a NIC, a PCIe
switch or a leaf's oversubscribed uplinks divide it (TensorOpt §3.2); groups on separate links do
not slow each other. With several groups the worst alpha and the worst B are combined. A route
crosses the switch levels between nodes that its two ends need (cluster.switches), one hop per
level each way, so alpha and B see the spine only for groups that span leaves. Flows are built
once per shape of group and shifted to the others (cluster.flowsets); beyond PAIRWISE_FLOWS,
pairwise all-to-all's loads are counted by class rather than flow by flow (cluster.alltoall).

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

import numpy as np

from stratagem.cluster.flowsets import FlowArrays, Shapes
from stratagem.cluster.patterns import (
    chain_flows, pairwise_flows, reverse, ring_flows, tree_edges,
)
from stratagem.cluster.spec import Protocol
from stratagem.cluster.usage import LinkUsage
from stratagem.errors import ConfigError

PAIRWISE_FLOWS = 1 << 18     # beyond this many all-to-all flows, their loads are counted by class
LOOP_DEVICES = 512           # groups up to this size are split by node in a loop, larger ones with arrays
KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")
Groups = tuple[tuple[int, ...], ...]


class TopologyView(TypingProtocol):
    devices_per_node: int

    def link_usage(self, src: np.ndarray, dst: np.ndarray, weights: np.ndarray) -> LinkUsage: ...
    def all_to_all_usage(self, groups: Groups) -> LinkUsage: ...
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


def bottleneck(view: TopologyView, flows: FlowArrays) -> tuple[float, float]:
    """(worst hop latency, worst bottleneck bandwidth) of groups whose flows run at the same time:
    cluster.usage's rule on the flows of every group together."""
    if not len(flows):
        return 0.0, float("inf")
    usage = view.link_usage(flows.src, flows.dst, flows.weights)
    return usage.latency_s, usage.bottleneck_bandwidth()


def _params(view: TopologyView, name: str, flows: FlowArrays, steps: int,
            volume: float, reduction: float) -> AlgorithmParams:
    latency, bandwidth = bottleneck(view, flows)
    return AlgorithmParams(name, steps, latency, bandwidth, volume, reduction)


def _parts(view: TopologyView, group: Sequence[int]) -> list[list[int]]:
    """The group's members on each of its nodes, nodes ascending, members sorted."""
    per = view.devices_per_node
    if len(group) <= LOOP_DEVICES:
        by_node: dict[int, list[int]] = {}
        for d in sorted(group):
            by_node.setdefault(d // per, []).append(d)
        return [by_node[n] for n in sorted(by_node)]
    devices = np.sort(np.asarray(group, dtype=np.int64))
    bounds = [0, *(np.flatnonzero(np.diff(devices // per)) + 1).tolist(), len(devices)]
    items = devices.tolist()
    return [items[a:b] for a, b in zip(bounds, bounds[1:])]


def flat_algorithms(view: TopologyView, kind: str, groups: Groups,
                    memo: dict | None = None) -> tuple[AlgorithmParams, ...]:
    """Each flat algorithm's parameters; flows worked out once per shape of group (cluster.flowsets).
    `memo`: the bottlenecks of rings and trees by groups (`_shared_bottlenecks`)."""
    p = len(groups[0])
    if kind in ("all_reduce", "all_gather", "reduce_scatter"):
        ring, tree = _shared_bottlenecks(view, groups, {} if memo is None else memo, kind == "all_reduce")
        if kind == "all_reduce":
            depth, tree_bottleneck = tree
            return (AlgorithmParams("ring", 2 * (p - 1), *ring, 2 * (p - 1) / p, (p - 1) / p),
                    AlgorithmParams("tree", 2 * depth, *tree_bottleneck, 2.0, 1.0))
        reduction = (p - 1) / p if kind == "reduce_scatter" else 0.0
        return (AlgorithmParams("ring", p - 1, *ring, (p - 1) / p, reduction),)
    shapes = Shapes(groups, view.devices_per_node)
    if kind == "send_recv":
        return (_params(view, "direct", shapes.flows(shapes.each(lambda g: ((g[0], g[1], 1.0),))), 1, 1.0, 0.0),)
    if kind == "all_to_all":
        return (_pairwise(view, groups, shapes, p),)
    channels = shapes.each(view.ring_channels)
    trees = shapes.each(lambda g: tree_edges(_parts(view, g)))
    depth = max(d for _, d in trees)
    chains = [chain_flows(_rotate(c[0][0], min(g))) for c, g in zip(channels, shapes.shapes)]
    return (_params(view, "chain", shapes.flows(chains), p - 1, 1.0, 0.0),
            _params(view, "tree", shapes.flows([reverse(f) for f, _ in trees]), depth, 1.0, 0.0))


def _shared_bottlenecks(view: TopologyView, groups: Groups, memo: dict, with_tree: bool) -> tuple:
    """(ring bottleneck, (tree depth, tree bottleneck) or None), each worked out once per groups in
    `memo`: an all-reduce, all-gather and reduce-scatter on the same groups run the same ring, and
    the hierarchical phases' intra- and inter-node groups recur across kinds."""
    ring, tree = memo.get(("ring", groups)), memo.get(("tree", groups)) if with_tree else None
    if ring is None or (with_tree and tree is None):
        shapes = Shapes(groups, view.devices_per_node)
        if ring is None:
            ring = memo[("ring", groups)] = bottleneck(
                view, shapes.flows([ring_flows(c) for c in shapes.each(view.ring_channels)]))
        if with_tree and tree is None:
            trees = shapes.each(lambda g: tree_edges(_parts(view, g)))
            tree = memo[("tree", groups)] = (max(d for _, d in trees),
                                             bottleneck(view, shapes.flows([f for f, _ in trees])))
    return ring, tree


def _pairwise(view: TopologyView, groups: Groups, shapes: Shapes, p: int) -> AlgorithmParams:
    """Pairwise all-to-all: its p (p - 1) flows per group, or, beyond PAIRWISE_FLOWS, their link
    loads counted by class (cluster.alltoall; the same loads)."""
    if len(groups) * p * (p - 1) <= PAIRWISE_FLOWS:
        return _params(view, "pairwise", shapes.flows(shapes.each(pairwise_flows)), p - 1, (p - 1) / p, 0.0)
    usage = view.all_to_all_usage(groups)
    return AlgorithmParams("pairwise", p - 1, usage.latency_s, usage.bottleneck_bandwidth(), (p - 1) / p, 0.0)


def _rotate(order: Sequence[int], root: int) -> tuple[int, ...]:
    i = list(order).index(root)
    return tuple(order[i:]) + tuple(order[:i])


_HIERARCHY = {
    "all_reduce": (("reduce_scatter", "intra", False), ("all_reduce", "inter", True),
                   ("all_gather", "intra", False)),
    "all_gather": (("all_gather", "inter", True), ("all_gather", "intra", False)),
    "reduce_scatter": (("reduce_scatter", "intra", False), ("reduce_scatter", "inter", True)),
}


def hierarchical_phases(view: TopologyView, kind: str, groups: Groups,
                        memo: dict | None = None) -> tuple[Phase, ...] | None:
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
                       flat_algorithms(view, phase_kind, intra if level == "intra" else inter, memo))
                 for phase_kind, level, scaled in _HIERARCHY[kind])


def plan_collective(view: TopologyView, kind: str, groups: Groups, memo: dict | None = None) -> CollectivePlan:
    """The flat algorithms and hierarchical phases of `kind` on `groups`; `memo` as flat_algorithms'
    (the caller's, kept across calls)."""
    memo = {} if memo is None else memo
    return CollectivePlan(flat_algorithms(view, kind, groups, memo), hierarchical_phases(view, kind, groups, memo))


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
