"""The switch levels between nodes: which switches a route climbs and what their links carry, by
arithmetic on node and NIC indices (no object per switch or per link).

Levels l = 0 (leaf) .. L-1 (top); below the top, level l groups consecutive nodes into blocks of
`nodes_l` (block_l(n) = n // nodes_l, each a multiple of the one below). A leaf switch serves one
block; with rails (rail-optimized, as NVIDIA's DGX SuperPOD reference architecture builds scalable
units of 32 nodes with one leaf switch per rail) one switch per block and NIC k. Switch indices
(`switch`):

    s_0(n, k) = block_0(n) * R + (k if rails else 0)      R = nics_per_node if rails else 1
    s_l(n)    = block_l(n)                                 l >= 1 (a level-1 switch joins all rails)

Every switch below the top has one up and one down link to its parent: the aggregate of its
uplinks, with flows spread over them by ECMP as a fluid (ideal load balancing, as flow-level
analytical network models assume; hash collisions are not modelled [M]), so that link's bandwidth
is what the switch's uplinks carry together:

    up_bw_l = nodes_l * nics_l * B / (ratio_1 * ... * ratio_{l+1})       (`up_bandwidth`)
    nics_0 = 1 with rails, else nics_per_node; nics_l = nics_per_node for l >= 1

with B the NIC link's bandwidth and ratio_i level i's oversubscription ("4:1": the uplinks of the
switches below carry 1/4 of what those switches have towards the nodes). A block counts at its
capacity (nodes_l), populated or not: a partly filled last leaf keeps its cabled uplinks. One
hop on those links takes level l+1's latency_s.

A route from NIC k of node a to NIC k' of node b (a != b) leaves by the NIC's link to its leaf
(a node link, `nic<k> -> net` in the node template), climbs while the two ends are under
different switches, and comes down the other side (`columns`):

    c = #{l < L-1 : s_l(a, k) != s_l(b, k')}        levels climbed (blocks nest, so a prefix)
    up links of s_0(a, k), s_1(a), ..., s_{c-1}(a); down links of s_{c-1}(b), ..., s_0(b, k')

so a group inside one leaf never touches a spine link, and one spanning leaves crosses them at
their oversubscribed bandwidth. Fabric link ids follow the node links (`base` = nodes x links
per node): id = base + 2 * (switches below level l) + 2 s + (0 up, 1 down). Without levels (no
`switches` section) there is no fabric link: one non-blocking switch, as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from stratagem.cluster.spec import ClusterSpec
from stratagem.cluster.topology import NETWORK


@dataclass(frozen=True)
class SwitchTree:
    num_nodes: int
    nics_per_node: int
    rails: bool
    names: tuple[str, ...]                # per level, leaf first; ("net",) for one switch
    block_nodes: tuple[int, ...]          # per level below the top: nodes per block
    counts: tuple[int, ...]               # per level below the top: switches
    up_bandwidth: tuple[float, ...]       # per level below the top: its up (and down) link, bytes/s
    up_latency_s: tuple[float, ...]       # per level below the top: one hop to the level above
    base: int                             # id of the first fabric link

    @staticmethod
    def of(spec: ClusterSpec, links_per_node: int) -> "SwitchTree":
        base = spec.num_nodes * links_per_node
        network = spec.network
        if network is None or network.switches is None:
            return SwitchTree(spec.num_nodes, 0 if network is None else network.nics_per_node, False,
                              (NETWORK,), (), (), (), (), base)
        levels, rails, nics = network.switches.levels, network.switches.rails, network.nics_per_node
        below = levels[:-1]
        blocks = tuple(level.nodes for level in below)
        per_switch = [1 if rails else nics] + [nics] * (len(below) - 1)
        counts = tuple(math.ceil(spec.num_nodes / size) * (nics if rails and l == 0 else 1)
                       for l, size in enumerate(blocks))
        ratios = [level.oversubscription for level in levels[1:]]
        bandwidth = tuple(size * per_switch[l] * network.link.bandwidth_bytes_per_s / math.prod(ratios[:l + 1])
                          for l, size in enumerate(blocks))
        latency = tuple(level.latency_s for level in levels[1:])
        return SwitchTree(spec.num_nodes, nics, rails, tuple(level.name for level in levels), blocks, counts,
                          bandwidth, latency, base)

    # ---- shape -------------------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        """Levels below the top: the most a route climbs."""
        return len(self.block_nodes)

    @property
    def num_links(self) -> int:
        return 2 * sum(self.counts)

    def _offset(self, level: int) -> int:
        return self.base + 2 * sum(self.counts[:level])

    # ---- routes (numpy arrays or ints) -------------------------------------------------------------
    def switch(self, level: int, node, nic):
        """s_l(node, nic): the switch of `level` that serves NIC `nic` of `node`."""
        block = node // self.block_nodes[level]
        if level == 0 and self.rails:
            return block * self.nics_per_node + nic
        return block

    def climbed(self, na: np.ndarray, nb: np.ndarray, ka: np.ndarray, kb: np.ndarray) -> np.ndarray:
        """Levels a route from NIC ka of node na to NIC kb of node nb climbs (0: one leaf)."""
        c = np.zeros(len(na), dtype=np.int64)
        for level in range(self.depth):
            c += self.switch(level, na, ka) != self.switch(level, nb, kb)
        return c

    def columns(self, na: np.ndarray, nb: np.ndarray, ka: np.ndarray, kb: np.ndarray) -> np.ndarray:
        """The fabric links of each route, in travel order: 2 * depth columns, -1 where unused."""
        c = self.climbed(na, nb, ka, kb)
        out = np.full((len(na), 2 * self.depth), -1, dtype=np.int64)
        for level in range(self.depth):
            used = level < c
            out[:, level] = np.where(used, self._offset(level) + 2 * self.switch(level, na, ka), -1)
            out[:, 2 * self.depth - 1 - level] = np.where(
                used, self._offset(level) + 2 * self.switch(level, nb, kb) + 1, -1)
        return out

    def path(self, na: int, nb: int, ka: int, kb: int) -> tuple[int, ...]:
        """`columns` for one route, with Python ints."""
        c = sum(self.switch(level, na, ka) != self.switch(level, nb, kb) for level in range(self.depth))
        return (*(self.up_link(level, na, ka) for level in range(c)),
                *(self.up_link(level, nb, kb) + 1 for level in reversed(range(c))))

    def up_link(self, level: int, node, nic):
        return self._offset(level) + 2 * self.switch(level, node, nic)

    # ---- what a fabric link is ---------------------------------------------------------------------
    def level_of(self, ids: np.ndarray) -> np.ndarray:
        """The level whose switches' uplinks fabric links `ids` are."""
        starts = np.array([self._offset(l) for l in range(self.depth)], dtype=np.int64)
        return np.searchsorted(starts, ids, side="right") - 1

    def bandwidth(self, ids: np.ndarray) -> np.ndarray:
        return np.asarray(self.up_bandwidth, dtype=float)[self.level_of(ids)]

    def latency_s(self, ids: np.ndarray) -> np.ndarray:
        return np.asarray(self.up_latency_s, dtype=float)[self.level_of(ids)]

    def vertex(self, level: int, index: int) -> str:
        """A switch's name: `leaf12` (`leaf12.rail3` with rails), the top level's bare name."""
        if level == self.depth:
            return self.names[-1]
        if level == 0 and self.rails:
            block, rail = divmod(index, self.nics_per_node)
            return f"{self.names[0]}{block}.rail{rail}"
        return f"{self.names[level]}{index}"

    def leaf_vertex(self, node: int, nic: int) -> str:
        """Where NIC `nic` of `node` plugs in."""
        return self.vertex(0, self.switch(0, node, nic)) if self.depth else self.names[-1]

    def describe(self, link: int) -> tuple[str, str, str, float, float]:
        """(src, dst, kind, bandwidth, latency) of fabric link `link`."""
        level = int(self.level_of(np.array([link]))[0])
        switch, down = divmod(link - self._offset(level), 2)
        block = switch // self.nics_per_node if level == 0 and self.rails else switch
        first_node = block * self.block_nodes[level]
        parent = first_node // self.block_nodes[level + 1] if level + 1 < self.depth else 0
        ends = (self.vertex(level, switch), self.vertex(level + 1, parent))
        src, dst = ends[::-1] if down else ends
        return src, dst, self.names[level + 1], self.up_bandwidth[level], self.up_latency_s[level]
