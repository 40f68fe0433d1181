"""Every route of a cluster, many at a time: arrays of link ids built by arithmetic from one node
template's paths and the switch tree, and what each link is, computed when asked.

A route from device a = (node na, local la) to b = (nb, lb), as link ids in travel order (`rows`):

    na == nb:  local_path(la, lb)                          + na * links_per_node
    na != nb:  out(la) + na * links_per_node,  fabric(na, nb, k, k'),  in(lb) + nb * links_per_node

out(la) is the node template's best path from la to the network through some NIC k, in(lb) the
best from the network through NIC k' to lb (cluster.topology), and fabric the switch links between
them (cluster.switches; none without levels, so a cluster file without a `switches` section routes
exactly as before). With rails and both nodes under the same leaves, the pair (k, k') is chosen
with the route: the best of staying on one rail (k = k', through one leaf) and changing rails
(through the level above), by the same weight as the template's paths (latency + 1 MiB / bandwidth);
between leaves every rail climbs as high, so each end takes its best NIC.

Rows are padded with -1 (`PAD`); a route's links are its row's entries >= 0, in order. Per-link
bandwidth and latency come from the template (node links: id mod links_per_node) and the switch
tree (fabric links), so no object exists per link: `link(i)` makes a `Link` when one is read.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stratagem.cluster.spec import ClusterSpec
from stratagem.cluster.switches import SwitchTree
from stratagem.cluster.topology import NETWORK, REFERENCE_BYTES, Link, NodeTemplate
from stratagem.errors import ConfigError

PAD = -1


def _padded(paths: Sequence[tuple[int, ...] | None], width: int) -> np.ndarray:
    out = np.full((len(paths), width), PAD, dtype=np.int64)
    for i, path in enumerate(paths):
        if path:
            out[i, :len(path)] = path
    return out


def _width(paths: Sequence[tuple[int, ...] | None]) -> int:
    return max((len(p) for p in paths if p), default=0)


def _nic(template: NodeTemplate, path: tuple[int, ...] | None) -> int:
    """The NIC a path to or from the network goes through (-1 if none)."""
    for i in path or ():
        link = template.links[i]
        for end in (link.src, link.dst):
            if end.startswith("nic") and NETWORK in (link.src, link.dst):
                return int(end[3:])
    return -1


class RouteTable:
    """Routes of one cluster as arrays; built once per cluster, read-only afterwards."""

    def __init__(self, spec: ClusterSpec, template: NodeTemplate):
        self.per = spec.devices_per_node
        self.count = len(template.links)
        self.template = template
        self.switches = SwitchTree.of(spec, self.count)
        self.num_links = spec.num_nodes * self.count + self.switches.num_links
        per = range(self.per)
        local = [template.local_path(a, b) if a != b else () for a in per for b in per]
        self._local_paths = local
        self.local = _padded(local, _width(local)).reshape(self.per, self.per, -1)
        self.local_ok = np.array([p is not None for p in local]).reshape(self.per, self.per)
        out = [template.path_to_network(a) for a in per]
        into = [template.path_from_network(b) for b in per]
        self._halves = (out, into, [_nic(template, p) for p in out], [_nic(template, p) for p in into])
        self.out, self.into = _padded(out, _width(out)), _padded(into, _width(into))
        self.out_ok = np.array([p is not None for p in out])
        self.into_ok = np.array([p is not None for p in into])
        self.out_nic = np.array([_nic(template, p) for p in out], dtype=np.int64)
        self.into_nic = np.array([_nic(template, p) for p in into], dtype=np.int64)
        self.link_bandwidth = np.array([l.link.bandwidth_bytes_per_s for l in template.links], dtype=float)
        self.link_latency_s = np.array([l.link.latency_s for l in template.links], dtype=float)
        self.rail_choice = RailChoice(self) if self.switches.rails else None
        self._cache: dict[tuple[int, int], tuple[tuple[int, ...], float]] = {}

    # ---- routes ------------------------------------------------------------------------------------
    def rows(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Routes src[i] -> dst[i] as rows of link ids padded with PAD (an empty row if src == dst)."""
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        na, la = np.divmod(src, self.per)
        nb, lb = np.divmod(dst, self.per)
        same = na == nb
        out, into = self.out[la], self.into[lb]
        ka, kb = self.out_nic[la], self.into_nic[lb]
        if self.rail_choice is not None:
            out, into, ka, kb = self.rail_choice.apply(na, nb, la, lb, same, out, into, ka, kb)
        self._check(src, dst, same, la, lb)
        cross = np.concatenate([self._shift(out, na), self.switches.columns(na, nb, ka, kb),
                                self._shift(into, nb)], axis=1)
        local = self._shift(self.local[la, lb], na)
        width = max(cross.shape[1], local.shape[1])
        rows = np.full((len(src), width), PAD, dtype=np.int64)
        rows[:, :cross.shape[1]] = np.where(same[:, None], PAD, cross)
        rows[same, :local.shape[1]] = local[same]
        return rows

    def _shift(self, paths: np.ndarray, node: np.ndarray) -> np.ndarray:
        return np.where(paths >= 0, paths + node[:, None] * self.count, PAD)

    def _check(self, src, dst, same, la, lb) -> None:
        bad = np.where(same, ~self.local_ok[la, lb] & (la != lb), ~(self.out_ok[la] & self.into_ok[lb]))
        if bad.any():
            i = int(np.argmax(bad))
            self._unconnected(int(src[i]), int(dst[i]))

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        """One route, as `rows` builds it, with Python ints (a single route is asked for often:
        the simulator's link resources, the nearest holder of a replicated piece)."""
        (na, la), (nb, lb) = divmod(src, self.per), divmod(dst, self.per)
        if na == nb:
            path = self._local_paths[la * self.per + lb]
            if path is None:
                self._unconnected(src, dst)
            return tuple(i + na * self.count for i in path)
        out, into, out_nic, into_nic = self._halves
        halves = (out[la], into[lb], out_nic[la], into_nic[lb])
        if self.rail_choice is not None and self.rail_choice.near(na, nb):
            halves = self.rail_choice.chosen[la][lb]
        up, down, ka, kb = halves
        if up is None or down is None:
            self._unconnected(src, dst)
        return (*(i + na * self.count for i in up), *self.switches.path(na, nb, ka, kb),
                *(i + nb * self.count for i in down))

    def cached(self, src: int, dst: int) -> tuple[tuple[int, ...], float]:
        """(`route`, its latency: per-hop latencies summed in travel order), kept once computed."""
        found = self._cache.get((src, dst))
        if found is None:
            path = self.route(src, dst)
            found = self._cache[(src, dst)] = (path, sum(self.latency_of(i) for i in path))
        return found

    @staticmethod
    def _unconnected(src: int, dst: int):
        raise ConfigError(f"no route from device {src} to device {dst}",
                          hint="The cluster file's fabrics leave them unconnected; add a link")

    # ---- what links are ----------------------------------------------------------------------------
    def bandwidth(self, ids: np.ndarray) -> np.ndarray:
        """Bytes/s per direction of links `ids` (all >= 0)."""
        node = ids < self.switches.base
        found = self.link_bandwidth[np.where(node, ids, 0) % self.count]
        if not node.all():
            found = np.where(node, found, self.switches.bandwidth(np.where(node, self.switches.base, ids)))
        return found

    def bandwidth_of(self, link: int) -> float:
        """`bandwidth` of one link."""
        if link < self.switches.base:
            return float(self.link_bandwidth[link % self.count])
        return float(self.switches.bandwidth(np.array([link]))[0])

    def latency_of(self, link: int) -> float:
        """`latency_s` of one link."""
        if link < self.switches.base:
            return float(self.link_latency_s[link % self.count])
        return float(self.switches.latency_s(np.array([link]))[0])

    def latency_s(self, ids: np.ndarray) -> np.ndarray:
        """Per-hop latency of links `ids`; 0 for PAD."""
        node = ids < self.switches.base
        found = np.where(ids >= 0, self.link_latency_s[np.where(ids >= 0, ids, 0) % self.count], 0.0)
        if not node.all():
            found = np.where(node, found, self.switches.latency_s(np.where(node, self.switches.base, ids)))
        return found

    def route_latency_s(self, rows: np.ndarray) -> np.ndarray:
        """Per row, the sum of its links' latencies, added in travel order (as `sum` over a route)."""
        total = np.zeros(len(rows))
        for column in rows.T:
            total += self.latency_s(column)
        return total

    def link(self, i: int) -> Link:
        if not 0 <= i < self.num_links:
            raise IndexError(f"link {i} of {self.num_links}")
        if i >= self.switches.base:
            src, dst, kind, bandwidth, latency = self.switches.describe(i)
            return Link(i, src, dst, kind, bandwidth, latency, -1)
        node, local = divmod(i, self.count)
        spec = self.template.links[local]
        ends = [self._vertex(node, end, (spec.src, spec.dst)) for end in (spec.src, spec.dst)]
        return Link(i, ends[0], ends[1], spec.kind, spec.link.bandwidth_bytes_per_s, spec.link.latency_s, node)

    def _vertex(self, node: int, local: str, ends: tuple[str, str]) -> str:
        if local != NETWORK:
            return f"n{node}.{local}"
        nic = next(int(end[3:]) for end in ends if end.startswith("nic"))
        return self.switches.leaf_vertex(node, nic)


class RailChoice:
    """With rails, routes between nodes under the same leaves pick their NICs pairwise: per (la, lb),
    one rail through one leaf, or two rails through the level above, whichever weighs less."""

    def __init__(self, table: RouteTable):
        template, switches = table.template, table.switches
        per = range(table.per)
        outs = [template.nic_paths(a, reverse=False) for a in per]
        ins = [template.nic_paths(b, reverse=True) for b in per]
        climb = 2 * (switches.up_latency_s[0] + REFERENCE_BYTES / switches.up_bandwidth[0])
        self.chosen = chosen = [[self._best(outs[a], ins[b], template, climb) for b in per] for a in per]
        flat = [c for row in chosen for c in row]
        self.out = _padded([c[0] for c in flat], _width([c[0] for c in flat])).reshape(table.per, table.per, -1)
        self.into = _padded([c[1] for c in flat], _width([c[1] for c in flat])).reshape(table.per, table.per, -1)
        self.ka = np.array([c[2] for c in flat], dtype=np.int64).reshape(table.per, table.per)
        self.kb = np.array([c[3] for c in flat], dtype=np.int64).reshape(table.per, table.per)
        self.leaf_nodes = switches.block_nodes[0]

    @staticmethod
    def _best(outs, ins, template: NodeTemplate, climb: float):
        def weight(path):
            return sum(template.links[i].link.latency_s + REFERENCE_BYTES / template.links[i].link.bandwidth_bytes_per_s
                       for i in path)
        options = [(weight(outs[k]) + weight(ins[q]) + (climb if k != q else 0.0), k != q, k, q)
                   for k in sorted(outs) for q in sorted(ins)]
        if not options:
            return None, None, -1, -1
        _, _, k, q = min(options)
        return outs[k], ins[q], k, q

    def near(self, na, nb):
        """Whether nodes na and nb are under the same leaves."""
        return na // self.leaf_nodes == nb // self.leaf_nodes

    def apply(self, na, nb, la, lb, same, out, into, ka, kb):
        near = ~same & self.near(na, nb)
        if not near.any():
            return out, into, ka, kb
        width_out = max(out.shape[1], self.out.shape[2])
        width_into = max(into.shape[1], self.into.shape[2])
        out, into = _widen(out, width_out), _widen(into, width_into)
        out[near] = _widen(self.out[la[near], lb[near]], width_out)
        into[near] = _widen(self.into[la[near], lb[near]], width_into)
        ka, kb = ka.copy(), kb.copy()
        ka[near], kb[near] = self.ka[la[near], lb[near]], self.kb[la[near], lb[near]]
        return out, into, ka, kb


def _widen(paths: np.ndarray, width: int) -> np.ndarray:
    if paths.shape[1] >= width:
        return paths.copy()
    return np.concatenate([paths, np.full((len(paths), width - paths.shape[1]), PAD, dtype=np.int64)], axis=1)
