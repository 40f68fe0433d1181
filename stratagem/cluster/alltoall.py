"""All-to-all at scale: the link loads of every pair of a large group, counted by class instead of
flow by flow (pairwise all-to-all over 16,384 devices is 268 M flows).

Pairwise all-to-all (cluster.patterns.pairwise_flows) puts weight w = 1/(p-1) on every ordered
pair (a, b), a != b, of a group. A route between two nodes is the source's half (its node's path
out through a NIC, then the up links of its switches) and the destination's half (the down links,
then its node's path in; cluster.routes, cluster.switches), and each half depends on the other end
only through how far apart the two are. So, summing over pairs (`_halves`):

    out(la) + na * links_per_node     gets  w * #{b : n(b) != n(a)}                   (rails: b under
                                                                                        other leaves)
    up link of switch s_l(na, k(la))  gets  w * #{b : block_l(b) != block_l(a)}      (l < depth)

and the same for every destination's half (`into`, down links). Pairs on one node are flows, as in
cluster.usage (`_same_node`). With rails, pairs under the same leaves on different nodes pick
their NICs pairwise (cluster.routes), so they are counted per (a, local rank r of b) (`_near`):
w * #{b in a's leaf block, not on a's node, with local rank r}, on the path out for (la, r) and,
when its two NICs differ, on the leaf's up link.

The slowest route (`_latency_s`): for local ranks (la, lb), blocks are ranges of consecutive nodes,
so the members of rank la and of rank lb are all under one switch of a level exactly when the min
and max of their block indices agree; the highest level where they do not is the longest climb of
such a pair, and its latency is the two halves' plus one hop up and one down per level climbed.

Loads are the same as summing the p (p - 1) flows (up to rounding: they are added in another
order); tests/cluster/test_alltoall.py checks the two against each other.
"""

from __future__ import annotations

import numpy as np

from stratagem.cluster.routes import PAD, RouteTable
from stratagem.cluster.usage import LinkUsage, usage_of_rows

Part = tuple[np.ndarray, np.ndarray]      # rows of link ids, weights


def all_to_all_usage(routes: RouteTable, groups) -> LinkUsage:
    """Loads and slowest route of pairwise all-to-all run by all `groups` at once."""
    parts: list[Part] = []
    latency = 0.0
    for group in groups:
        members = _Members(routes, np.asarray(group, dtype=np.int64))
        (src, dst), weights = _same_node(members)
        if len(src):
            rows = routes.rows(src, dst)
            parts.append((rows, weights))
            latency = max(latency, float(np.max(routes.route_latency_s(rows))))
        parts.extend(_halves(routes, members))
        if routes.switches.rails:
            parts.extend(_near(routes, members))
        latency = max(latency, _latency_s(routes, members))
    parts = [(rows[weights > 0], weights[weights > 0]) for rows, weights in parts]
    return usage_of_rows(routes, [part for part in parts if len(part[1])], latency)


class _Members:
    """One group: its members' nodes, local ranks, and how many members each block holds."""

    def __init__(self, routes: RouteTable, devices: np.ndarray):
        self.p = len(devices)
        self.weight = 1.0 / (self.p - 1)
        self.node, self.local = np.divmod(devices, routes.per)
        self.per = routes.per
        tree = routes.switches
        # partitions of the nodes, finest first: the node itself, then the blocks of each level
        self.parts = [self.node] + [self.node // size for size in tree.block_nodes]

    def outside(self, level: int) -> np.ndarray:
        """Per member, how many members are not in its part of partition `level`."""
        part = self.parts[level]
        _, index, counts = np.unique(part, return_inverse=True, return_counts=True)
        return self.p - counts[index]

    def by_rank(self, level: int) -> np.ndarray:
        """Per member and local rank r: members with rank r in its part of partition `level`."""
        keys, index = np.unique(self.parts[level], return_inverse=True)
        table = np.zeros((len(keys), self.per), dtype=np.int64)
        np.add.at(table, (index, self.local), 1)
        return table[index]


def _same_node(m: _Members) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """Every ordered pair of members on one node, as flows."""
    order = np.argsort(m.node, kind="stable")
    node = m.node[order]
    starts = np.searchsorted(node, node, side="left")
    ends = np.searchsorted(node, node, side="right")
    sizes = ends - starts
    src = np.repeat(np.arange(m.p), sizes)
    dst = np.repeat(starts, sizes) + (np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes))
    keep = src != dst
    devices = m.node[order] * m.per + m.local[order]
    return (devices[src[keep]], devices[dst[keep]]), np.full(int(keep.sum()), m.weight)


def _halves(routes: RouteTable, m: _Members) -> list[Part]:
    """Each member's half-route towards (and from) the members on other nodes, or, with rails,
    under other leaves; the switch links up to (and down from) the level where they meet."""
    tree, count = routes.switches, routes.count
    first = 1 if tree.rails else 0              # with rails, pairs under one leaf are `_near`'s
    far = m.outside(first) * m.weight
    out = np.where(routes.out[m.local] >= 0, routes.out[m.local] + (m.node * count)[:, None], PAD)
    into = np.where(routes.into[m.local] >= 0, routes.into[m.local] + (m.node * count)[:, None], PAD)
    parts = [(out, far), (into, far)]
    for level in range(tree.depth):
        across = m.outside(level + 1) * m.weight
        up = tree.up_link(level, m.node, routes.out_nic[m.local])
        down = tree.up_link(level, m.node, routes.into_nic[m.local]) + 1
        parts += [(up[:, None], across), (down[:, None], across)]
    return parts


def _near(routes: RouteTable, m: _Members) -> list[Part]:
    """With rails: pairs under the same leaves on different nodes, per (member, other's rank)."""
    rails, tree, count = routes.rail_choice, routes.switches, routes.count
    counts = (m.by_rank(1) - m.by_rank(0)) * m.weight          # (members, ranks)
    me = np.repeat(np.arange(m.p), m.per)
    other = np.tile(np.arange(m.per), m.p)
    node, local, weight = m.node[me], m.local[me], counts.ravel()
    parts = []
    for sending in (True, False):
        la, lb = (local, other) if sending else (other, local)
        paths = rails.out[la, lb] if sending else rails.into[la, lb]
        parts.append((np.where(paths >= 0, paths + (node * count)[:, None], PAD), weight))
        change = rails.ka[la, lb] != rails.kb[la, lb]
        nic = rails.ka[la, lb] if sending else rails.kb[la, lb]
        link = tree.up_link(0, node, nic) + (0 if sending else 1)
        parts.append((link[change][:, None], weight[change]))
    return parts


def _latency_s(routes: RouteTable, m: _Members) -> float:
    """The slowest route between members on different nodes (see the module's docstring)."""
    tree = routes.switches
    ranks = np.unique(m.local)
    first = 1 if tree.rails else 0
    lows = np.array([[part[m.local == r].min() for part in m.parts] for r in ranks])
    highs = np.array([[part[m.local == r].max() for part in m.parts] for r in ranks])
    spans = np.minimum(lows[:, None], lows[None, :]) != np.maximum(highs[:, None], highs[None, :])
    climb = spans[:, :, 1:].sum(axis=2)                          # block levels spanned
    hops = np.concatenate([[0.0], np.cumsum(tree.up_latency_s)]) * 2
    halves = (routes.route_latency_s(routes.out)[ranks][:, None]
              + routes.route_latency_s(routes.into)[ranks][None, :])
    cross = np.where(spans[:, :, first], halves + hops[climb], 0.0)
    worst = float(cross.max()) if cross.size else 0.0
    if tree.rails:
        worst = max(worst, _near_latency_s(routes, m, ranks))
    return worst


def _near_latency_s(routes: RouteTable, m: _Members, ranks: np.ndarray) -> float:
    """With rails: the slowest route of a pair under one leaf, on different nodes."""
    rails, tree = routes.rail_choice, routes.switches
    blocks, block = np.unique(m.parts[1], return_inverse=True)
    nodes = np.zeros((len(blocks), m.per), dtype=np.int64)        # nodes per (block, rank)
    lowest = np.full((len(blocks), m.per), np.iinfo(np.int64).max)
    np.add.at(nodes, (block, m.local), 1)                         # members are distinct devices
    np.minimum.at(lowest, (block, m.local), m.node)
    a, b = nodes[:, ranks][:, :, None], nodes[:, ranks][:, None, :]
    same = lowest[:, ranks][:, :, None] == lowest[:, ranks][:, None, :]
    exists = ((a >= 1) & (b >= 1) & ~((a == 1) & (b == 1) & same)).any(axis=0)
    la, lb = np.meshgrid(ranks, ranks, indexing="ij")
    climb = np.where(rails.ka[la, lb] != rails.kb[la, lb], 2 * tree.up_latency_s[0], 0.0)
    out = routes.route_latency_s(rails.out[la, lb].reshape(-1, rails.out.shape[2])).reshape(la.shape)
    into = routes.route_latency_s(rails.into[la, lb].reshape(-1, rails.into.shape[2])).reshape(la.shape)
    latency = np.where(exists, out + into + climb, 0.0)
    return float(latency.max()) if latency.size else 0.0
