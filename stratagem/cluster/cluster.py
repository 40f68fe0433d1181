"""Cluster: devices, links and routes of a ClusterSpec, and the time of collectives on it.

Holds the caches (routes, ring channels, collective plans) that make repeated pricing cheap; the
spec and the optional profiled `CommTable` are its only inputs. Where the table has an entry for
(collective, partitioning) it wins over the model (TensorOpt §3.2).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from stratagem.cluster.collectives import (
    CollectivePlan, Estimate, check_kind, estimate, plan_collective,
)
from stratagem.cluster.comm_table import CommTable, Groups, normalize_groups
from stratagem.cluster.patterns import MAX_SEARCH_DEVICES, search_channels
from stratagem.cluster.spec import ClusterSpec
from stratagem.cluster.topology import NETWORK, REFERENCE_BYTES, Device, Link, Node, NodeTemplate
from stratagem import values
from stratagem.errors import ConfigError

Channels = tuple[tuple[tuple[int, ...], float], ...]


class Cluster:
    def __init__(self, spec: ClusterSpec, comm_table: CommTable | None = None):
        self.spec = spec
        self.comm_table = comm_table
        self._template = NodeTemplate(spec)
        per, local_links = spec.devices_per_node, self._template.links
        self.devices = tuple(Device(n * per + i, n, i, spec.device)
                             for n in range(spec.num_nodes) for i in range(per))
        self.nodes = tuple(Node(n, tuple(range(n * per, (n + 1) * per))) for n in range(spec.num_nodes))
        self.links = tuple(Link(n * len(local_links) + i, _vertex(n, l.src), _vertex(n, l.dst), l.kind,
                                l.link.bandwidth_bytes_per_s, l.link.latency_s, n)
                           for n in range(spec.num_nodes) for i, l in enumerate(local_links))
        self._bandwidth = [link.bandwidth_bytes_per_s for link in self.links]
        self._routes: dict[tuple[int, int], tuple[int, ...]] = {}
        self._latency: dict[tuple[int, int], float] = {}
        self._weights: dict[tuple[int, int], float] = {}
        self._channels: dict[tuple[int, ...], Channels] = {}
        self._plans: dict[tuple[str, Groups], CollectivePlan] = {}

    # ---- structure -----------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def num_devices(self) -> int:
        return len(self.devices)

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
        if not (isinstance(d, int) and 0 <= d < len(self.devices)):
            raise ConfigError(f"cluster {self.name!r} has no device {d!r}",
                              expected=f"a device in 0..{len(self.devices) - 1}", got=repr(d))

    # ---- routes --------------------------------------------------------------------------------------
    def route(self, src: int, dst: int) -> tuple[Link, ...]:
        return tuple(self.links[i] for i in self.route_ids(src, dst))

    def route_ids(self, src: int, dst: int) -> tuple[int, ...]:
        key = (src, dst)
        found = self._routes.get(key)
        if found is None:
            found = self._routes[key] = self._find_route(src, dst)
        return found

    def _find_route(self, src: int, dst: int) -> tuple[int, ...]:
        self._check_device(src)
        self._check_device(dst)
        if src == dst:
            return ()
        per, count = self.spec.devices_per_node, len(self._template.links)
        (ns, ls), (nd, ld) = divmod(src, per), divmod(dst, per)
        if ns == nd:
            halves = [(ns, self._template.local_path(ls, ld))]
        else:
            halves = [(ns, self._template.path_to_network(ls)), (nd, self._template.path_from_network(ld))]
        if any(path is None for _, path in halves):
            raise ConfigError(f"cluster {self.name!r}: no route from device {src} to device {dst}",
                              hint="The cluster file's fabrics leave them unconnected; add a link")
        return tuple(node * count + i for node, path in halves for i in path)

    def route_latency_s(self, src: int, dst: int) -> float:
        key = (src, dst)
        found = self._latency.get(key)
        if found is None:
            found = self._latency[key] = sum(self.links[i].latency_s for i in self.route_ids(src, dst))
        return found

    def link_bandwidth(self, link: int) -> float:
        return self._bandwidth[link]

    def route_weight_s(self, src: int, dst: int) -> float:
        """Time of a REFERENCE_BYTES message over the route, alone: how 'near' dst is to src."""
        key = (src, dst)
        found = self._weights.get(key)
        if found is None:
            links = self.route_ids(src, dst)
            slowest = min((self._bandwidth[i] for i in links), default=float("inf"))
            found = self._weights[key] = self.route_latency_s(src, dst) + REFERENCE_BYTES / slowest
        return found

    # ---- collectives ---------------------------------------------------------------------------------
    def ring_channels(self, group: tuple[int, ...]) -> Channels:
        """Rings over `group` with their data shares (see cluster.patterns)."""
        if len(group) < 2:
            return ((tuple(group), 1.0),)
        per = self.spec.devices_per_node
        parts: dict[int, list[int]] = {}
        for d in sorted(group):
            parts.setdefault(self.node_of(d), []).append(d)
        if len(parts) == 1:
            (node, members), = parts.items()
            local = self._local_channels(tuple(d - node * per for d in members))
            return tuple((tuple(d + node * per for d in order), share) for order, share in local)
        order: list[int] = []
        for node in sorted(parts):
            local = self._local_channels(tuple(d - node * per for d in parts[node]))[0][0]
            start = local.index(min(local))
            order.extend(d + node * per for d in (*local[start:], *local[:start]))
        return ((tuple(order), 1.0),)

    def _local_channels(self, local: tuple[int, ...]) -> Channels:
        found = self._channels.get(local)
        if found is None:
            if 2 < len(local) <= MAX_SEARCH_DEVICES:
                found = search_channels(local, self.route_ids, self.link_bandwidth)
            else:
                found = ((local, 1.0),)
            self._channels[local] = found
        return found

    def collective_estimate(self, kind: str, num_bytes: float, groups: Iterable[Sequence[int]]) -> Estimate:
        """Time, algorithm and protocol of `kind` run by all `groups` at once (n bytes per group)."""
        check_kind(kind)
        key = normalize_groups(groups)
        self._check_groups(kind, key)
        if len(key[0]) == 1 or num_bytes <= 0:
            return Estimate(0.0, "none", "none")
        if self.comm_table is not None and (kind, key) in self.comm_table:
            return Estimate(self.comm_table.time_s(kind, num_bytes, key), "measured", "-", "table")
        plan = self._plans.get((kind, key))
        if plan is None:
            plan = self._plans[(kind, key)] = plan_collective(self, kind, key)
        return estimate(plan, num_bytes, self.spec.protocols, self.spec.reduction_s_per_byte)

    def concurrent_collective_time_s(self, kind: str, num_bytes: float,
                                     groups: Iterable[Sequence[int]]) -> float:
        return self.collective_estimate(kind, num_bytes, groups).time_s

    def collective_time_s(self, kind: str, num_bytes: float, group: Sequence[int]) -> float:
        return self.collective_estimate(kind, num_bytes, [group]).time_s

    def _check_groups(self, kind: str, groups: Groups) -> None:
        if not groups or not groups[0]:
            raise ConfigError(f"{kind}: no devices", expected="at least one non-empty group", got=str(groups))
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
        """Point-to-point transfers (src, dst, num_bytes) all at once, sharing the links they cross."""
        load: dict[int, float] = {}
        latency = 0.0
        for src, dst, num_bytes in transfers:
            if src == dst or num_bytes <= 0:
                continue
            latency = max(latency, self.route_latency_s(src, dst))
            for link in self.route_ids(src, dst):
                load[link] = load.get(link, 0.0) + num_bytes
        if not load:
            return 0.0
        serial = max(b / self._bandwidth[link] for link, b in load.items())
        return min(p.base_latency_s + p.latency_scale * latency + serial / p.bandwidth_factor
                   for p in self.spec.protocols)

    def __repr__(self) -> str:
        return (f"Cluster({self.name!r}: {self.spec.num_nodes} x {self.spec.devices_per_node} "
                f"{self.spec.device.kind})")


def _vertex(node: int, local: str) -> str:
    return local if local == NETWORK else f"n{node}.{local}"
