"""Cluster: devices, links and routes of a ClusterSpec, and the time of collectives on it.

Holds the caches (routes, ring channels, collective plans) that make repeated pricing cheap; the
spec and the optional profiled `CommTable` are its only inputs. Where the table has an entry for
(collective, partitioning) it wins over the model (TensorOpt §3.2).

Devices, nodes and links are sequences that make their objects when read, and routes are arithmetic
on one node template and the switch tree (cluster.routes), so loading costs the same for 16 or
100,000 devices. Every price of moving bytes goes through `link_usage` (cluster.usage): the loads
that flows put on the links of their routes, the busiest link, the slowest route.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from stratagem.cluster.alltoall import all_to_all_usage
from stratagem.cluster.collectives import (
    LOOP_DEVICES, CollectivePlan, Estimate, check_kind, estimate, plan_collective,
)
from stratagem.cluster.comm_table import CommTable, Groups, normalize_groups
from stratagem.cluster.patterns import MAX_SEARCH_DEVICES, search_channels
from stratagem.cluster.lazy import LazySequence
from stratagem.cluster.routes import RouteTable
from stratagem.cluster.spec import ClusterSpec
from stratagem.cluster.topology import REFERENCE_BYTES, Device, Link, Node, NodeTemplate
from stratagem.cluster.usage import LinkUsage, link_usage
from stratagem import values
from stratagem.errors import ConfigError

Channels = tuple[tuple[tuple[int, ...], float], ...]

# copies between each device and its host's memory (cluster.spec.HostSpec): groups of one device,
# each over its own link, all at once
HOST_TRANSFERS = ("host_to_device", "device_to_host")


class Cluster:
    def __init__(self, spec: ClusterSpec, comm_table: CommTable | None = None):
        self.spec = spec
        self.comm_table = comm_table
        self._template = NodeTemplate(spec)
        self.routes = RouteTable(spec, self._template)
        self._rails = self.routes.switches.rails
        self.devices: Sequence[Device] = LazySequence(spec.num_devices, lambda d: _device(spec, d), "device")
        self.nodes: Sequence[Node] = LazySequence(spec.num_nodes, lambda n: _node(spec, n), "node")
        self.links: Sequence[Link] = LazySequence(self.routes.num_links, self.routes.link, "link")
        self._route_cache: dict[tuple[int, int], tuple[int, ...]] = {}
        self._step_links: dict[tuple, tuple[int, ...]] = {}
        self._weights: dict[tuple[int, int], float] = {}
        self._channels: dict[tuple[int, ...], Channels] = {}
        self._plans: dict[tuple[str, Groups], CollectivePlan] = {}
        self._bottlenecks: dict[tuple, tuple] = {}     # collectives.flat_algorithms' memo
        self._checked: dict[tuple[str, Groups], Groups] = {}
        self._transfer_times: dict[tuple, float] = {}

    # ---- structure -----------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def devices_per_node(self) -> int:
        return self.spec.devices_per_node

    @property
    def num_devices(self) -> int:
        return self.spec.num_devices

    def device_count(self, devices: int | None) -> int:
        """The devices a plan uses: all of them for None, else an integer in 1..num_devices."""
        if devices is None:
            return self.num_devices
        return values.integer(devices, f"device count on cluster {self.name!r}", 1, self.num_devices)

    def device(self, d: int) -> Device:
        self._check_device(d)
        return self.devices[d]

    def node_of(self, d: int) -> int:
        return d // self.spec.devices_per_node

    def with_comm_table(self, table: CommTable | None) -> "Cluster":
        return Cluster(self.spec, table)

    def _check_device(self, d: int) -> None:
        if not (isinstance(d, int) and 0 <= d < self.num_devices):
            raise ConfigError(f"cluster {self.name!r} has no device {d!r}",
                              expected=f"a device in 0..{self.num_devices - 1}", got=repr(d))

    # ---- routes --------------------------------------------------------------------------------------
    def route(self, src: int, dst: int) -> tuple[Link, ...]:
        return tuple(self.links[i] for i in self.route_ids(src, dst))

    def route_ids(self, src: int, dst: int) -> tuple[int, ...]:
        key = (src, dst)
        found = self._route_cache.get(key)
        if found is None:
            found = self._route_cache[key] = self._find_route(src, dst)
        return found

    def step_link_ids(self, kind: str, groups: tuple[tuple[int, ...], ...]) -> np.ndarray:
        """The links a communication step uses, sorted, as a read-only int64 array: each group's
        ring (i -> i + 1 around it), or for "p2p" each (source, destination) pair's route. Cached:
        simulations of many plans ask for the same steps. An array, not a tuple: a step over
        16,384 GPUs uses tens of thousands of links, and busy bounds and task graphs index by them."""
        key = (kind, groups)
        found = self._step_links.get(key)
        if found is None:
            found = self._step_links[key] = self._links_of_pairs(*_step_pairs(kind, groups))
        return found

    def _links_of_pairs(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """The links of the routes src[i] -> dst[i] (the route table's rows, all at once), sorted
        and read-only. Many routes: marked in one flag per link, not sorted."""
        for d in (src, dst):
            if len(d) and (d.min() < 0 or d.max() >= self.num_devices):
                self._check_device(int(d[(d < 0) | (d >= self.num_devices)][0]))
        keep = src != dst
        rows = self.routes.rows(src[keep], dst[keep])
        used = rows[rows >= 0]
        if used.size * 8 < len(self.links):
            found = np.unique(used)
        else:
            marked = np.zeros(len(self.links), dtype=bool)
            marked[used] = True
            found = np.flatnonzero(marked)
        found = found.astype(np.int64, copy=False)
        found.flags.writeable = False
        return found

    def _find_route(self, src: int, dst: int) -> tuple[int, ...]:
        self._check_device(src)
        self._check_device(dst)
        try:
            return self.routes.cached(src, dst)[0]
        except ConfigError as error:
            raise ConfigError(f"cluster {self.name!r}: {error.what}", hint=error.hint) from None

    def route_latency_s(self, src: int, dst: int) -> float:
        self.route_ids(src, dst)
        return self.routes.cached(src, dst)[1]

    def link_bandwidth(self, link: int) -> float:
        return self.routes.bandwidth_of(link)

    def link_usage(self, src: np.ndarray, dst: np.ndarray, weights: np.ndarray) -> LinkUsage:
        """Flows src[i] -> dst[i] of weights[i] all at once: the loads on the links they cross and
        the slowest route (cluster.usage; every price of moving bytes comes through here)."""
        return link_usage(self.routes, src, dst, weights)

    def all_to_all_usage(self, groups: Groups) -> LinkUsage:
        """Pairwise all-to-all of every group at once, its loads counted by class (cluster.alltoall)."""
        return all_to_all_usage(self.routes, groups)

    def route_weight_s(self, src: int, dst: int) -> float:
        """Time of a REFERENCE_BYTES message over the route, alone: how 'near' dst is to src."""
        key = (src, dst)
        found = self._weights.get(key)
        if found is None:
            links = self.route_ids(src, dst)
            slowest = min((self.link_bandwidth(i) for i in links), default=float("inf"))
            found = self._weights[key] = self.route_latency_s(src, dst) + REFERENCE_BYTES / slowest
        return found

    # ---- collectives ---------------------------------------------------------------------------------
    def ring_channels(self, group: tuple[int, ...]) -> Channels:
        """Rings over `group` with their data shares (see cluster.patterns). With rails, a ring
        across nodes enters each node on the rail the previous one left by (`_node_ring`)."""
        if len(group) < 2:
            return ((tuple(group), 1.0),)
        per = self.spec.devices_per_node
        nodes, parts = _node_parts(group, per)
        if len(nodes) == 1:
            local = self._local_channels(parts[0])
            return tuple((tuple(d + nodes[0] * per for d in order), share) for order, share in local)
        uniform = self._uniform_ring(nodes, parts[0]) if len(set(parts)) == 1 else None
        if uniform is not None:
            return ((uniform, 1.0),)
        order: list[int] = []
        exit_local = None
        for i, (node, part) in enumerate(zip(nodes, parts)):
            ring = self._node_ring(part, i, exit_local)
            exit_local = ring[-1]
            order.extend(d + node * per for d in ring)
        return ((tuple(order), 1.0),)

    def _node_ring(self, part: tuple[int, ...], i: int, exit_local: int | None) -> tuple[int, ...]:
        """The i-th node's stretch of a ring across nodes: its best ring from its lowest member, or,
        with rails, from the member the previous node left by, every other node backwards."""
        local = self._local_channels(part)[0][0]
        start = local.index(exit_local if self._rails and exit_local in local else min(local))
        ring = (*local[start:], *local[:start])
        return (ring[0], *ring[:0:-1]) if self._rails and i % 2 else ring

    def _uniform_ring(self, nodes: tuple[int, ...], part: tuple[int, ...]) -> tuple[int, ...] | None:
        """`ring_channels` across nodes that all hold the same local members, with arrays: node
        stretches then repeat every two nodes (None if they do not)."""
        first = self._node_ring(part, 0, None)
        second = self._node_ring(part, 1, first[-1])
        if self._node_ring(part, 2, second[-1]) != first:
            return None
        rings = np.array([first, second], dtype=np.int64)[np.arange(len(nodes)) % 2]
        base = np.array(nodes, dtype=np.int64)[:, None] * self.spec.devices_per_node
        return tuple((rings + base).ravel().tolist())

    def _local_channels(self, local: tuple[int, ...]) -> Channels:
        found = self._channels.get(local)
        if found is None:
            if 2 < len(local) <= MAX_SEARCH_DEVICES:
                found = search_channels(local, self.route_ids, self.link_bandwidth)
            else:
                found = ((local, 1.0),)
            self._channels[local] = found
        return found

    def collective_estimate(self, kind: str, num_bytes: float, groups: Iterable[Sequence[int]],
                            issued: str | None = None) -> Estimate:
        """Time, algorithm and protocol of `kind` run by all `groups` at once (n bytes per group);
        from a measured table, with the runtime's dispatch when `issued` says how the runtime
        issues it (cluster.comm_table: "move" or "sync")."""
        if kind in HOST_TRANSFERS:
            return Estimate(self.host_transfer_time_s(num_bytes), "host copy", "-")
        check_kind(kind)
        key = self._normalized(kind, groups)
        if len(key[0]) == 1 or num_bytes <= 0:
            return Estimate(0.0, "none", "none")
        if self.comm_table is not None and (kind, key) in self.comm_table:
            return Estimate(self.comm_table.time_s(kind, num_bytes, key, issued), "measured", "-", "table")
        plan = self._plans.get((kind, key))
        if plan is None:
            plan = self._plans[(kind, key)] = plan_collective(self, kind, key, self._bottlenecks)
        return estimate(plan, num_bytes, self.spec.protocols, self.spec.reduction_s_per_byte)

    def host_transfer_time_s(self, num_bytes: float) -> float:
        """A copy of `num_bytes` between a device and its host's memory (either way), over the
        device's own host link; refused on a cluster whose file says nothing of its hosts."""
        host = self.spec.host
        if host is None:
            raise ConfigError(f"cluster {self.name!r} has no host section: nothing can be offloaded to host memory",
                              expected="host: {link: {bandwidth_bytes_per_s, latency_s}, optimizer_bytes_per_s, "
                                       "memory_bytes} in the cluster file",
                              got="none", hint="Add the host section, or plan without offload (the 'offloaded' weight "
                                                  "state, offload_activations)")
        if num_bytes <= 0:
            return 0.0
        return host.link.latency_s + num_bytes / host.link.bandwidth_bytes_per_s

    def concurrent_collective_time_s(self, kind: str, num_bytes: float,
                                     groups: Iterable[Sequence[int]], issued: str | None = None) -> float:
        return self.collective_estimate(kind, num_bytes, groups, issued).time_s

    def collective_time_s(self, kind: str, num_bytes: float, group: Sequence[int]) -> float:
        return self.collective_estimate(kind, num_bytes, [group]).time_s

    def _normalized(self, kind: str, groups: Iterable[Sequence[int]]) -> Groups:
        """The groups sorted and checked (`_check_groups`), once per tuple of groups: the cost model
        prices one step's groups at many sizes, and on a large cluster they hold every device.
        Groups already sorted are kept as they are (the plans' key then hashes as theirs did)."""
        try:
            found = self._checked.get((kind, groups)) if isinstance(groups, tuple) else None
        except TypeError:                # a tuple of lists
            found = None
        if found is None:                # only tuples of tuples are kept: a tuple of ranges never equals one
            found = normalize_groups(groups)
            self._check_groups(kind, found)
            if isinstance(groups, tuple) and all(isinstance(g, tuple) for g in groups):
                found = groups if found == groups else found
                self._checked[(kind, groups)] = found
        return found

    def _check_groups(self, kind: str, groups: Groups) -> None:
        if not groups or not groups[0]:
            raise ConfigError(f"{kind}: no devices", expected="at least one non-empty group", got=str(groups))
        if _valid_groups(groups, self.num_devices) and (kind != "send_recv" or len(groups[0]) in (1, 2)):
            return
        seen: set[int] = set()
        for g in groups:
            for d in g:
                self._check_device(d)
            if len(g) != len(groups[0]) or len(set(g)) != len(g) or seen & set(g):
                raise ConfigError(f"{kind}: groups must be disjoint, of one size, without repeats",
                                  got=str(groups))
            seen.update(g)
        if kind == "send_recv" and len(groups[0]) not in (1, 2):
            raise ConfigError("send_recv groups are pairs", expected="groups of 2", got=str(groups))

    def transfers_time_s(self, transfers: Iterable[tuple[int, int, float]]) -> float:
        """Point-to-point transfers (src, dst, num_bytes) all at once, sharing the links they cross:
        the busiest link's bytes over its bandwidth, after the slowest route's latency."""
        moves = [(src, dst, num_bytes) for src, dst, num_bytes in transfers if src != dst and num_bytes > 0]
        if not moves:
            return 0.0
        src, dst, num_bytes = (np.array(column) for column in zip(*moves))
        return self.arrays_transfer_time_s(src, dst, num_bytes.astype(float))

    def arrays_transfer_time_s(self, src: np.ndarray, dst: np.ndarray, num_bytes: np.ndarray) -> float:
        """`transfers_time_s` of transfers given as arrays (each src != dst, bytes > 0), computed once
        per set of transfers (re-scheduling prices the same halo pattern for many layouts)."""
        key = (src.tobytes(), dst.tobytes(), num_bytes.tobytes())
        found = self._transfer_times.get(key)
        if found is None:
            found = self._transfer_times[key] = self._transfers_time_s(src, dst, num_bytes)
        return found

    def _transfers_time_s(self, src: np.ndarray, dst: np.ndarray, num_bytes: np.ndarray) -> float:
        if not (src.dtype.kind == dst.dtype.kind == "i" and min(src.min(), dst.min()) >= 0
                and max(src.max(), dst.max()) < self.num_devices):
            for d in (*src.tolist(), *dst.tolist()):
                self._check_device(d)
        usage = self.link_usage(src, dst, num_bytes.astype(float))
        serial = usage.busiest_time_s()
        return min(p.base_latency_s + p.latency_scale * usage.latency_s + serial / p.bandwidth_factor
                   for p in self.spec.protocols)

    def __repr__(self) -> str:
        return (f"Cluster({self.name!r}: {self.spec.num_nodes} x {self.spec.devices_per_node} "
                f"{self.spec.device.kind})")


def _node_parts(group: Sequence[int], per: int) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """(the group's nodes ascending, its members' local ranks on each, ascending)."""
    if len(group) <= LOOP_DEVICES:
        parts: dict[int, list[int]] = {}
        for d in sorted(group):
            parts.setdefault(d // per, []).append(d % per)
        return tuple(sorted(parts)), [tuple(parts[n]) for n in sorted(parts)]
    node, local = np.divmod(np.sort(np.asarray(group, dtype=np.int64)), per)
    bounds = [0, *(np.flatnonzero(np.diff(node)) + 1).tolist(), len(node)]
    nodes, locals_ = node.tolist(), local.tolist()
    return tuple(nodes[a] for a in bounds[:-1]), [tuple(locals_[a:b]) for a, b in zip(bounds, bounds[1:])]


def _valid_groups(groups: Groups, num_devices: int) -> bool:
    """Whether sorted int groups are of one size, disjoint, without repeats, on devices that exist
    (the common case, checked with arrays; `_check_groups` names what is wrong otherwise)."""
    size = len(groups[0])
    if any(len(g) != size for g in groups):
        return False
    devices = np.fromiter((d for g in groups for d in g), dtype=np.int64, count=size * len(groups))
    return bool(devices.min() >= 0 and devices.max() < num_devices and len(np.unique(devices)) == len(devices))


def _device(spec: ClusterSpec, d: int) -> Device:
    """Device d: node d // per, local rank d % per."""
    node, local = divmod(d, spec.devices_per_node)
    return Device(d, node, local, spec.device)


def _node(spec: ClusterSpec, n: int) -> Node:
    """Node n: devices n * per .. (n + 1) * per - 1."""
    per = spec.devices_per_node
    return Node(n, tuple(range(n * per, (n + 1) * per)))


def _step_pairs(kind: str, groups: tuple[tuple[int, ...], ...]) -> tuple[np.ndarray, np.ndarray]:
    """The (source, destination) pairs a step's traffic takes: for "p2p" each group's pair, else
    each group's ring, i -> i + 1 around it."""
    src, dst = [], []
    for group in groups:
        if kind == "p2p":
            src.append(group[0])
            dst.append(group[1])
        elif len(group) > 1:
            src.extend(group)
            dst.extend(group[1:])
            dst.append(group[0])
    return np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
