"""Devices, links and routes inside the identical nodes of a cluster.

Vertices of one node: devices `d<i>`, fabric vertices (`nvswitch`, `pcie.sw0`, `pcie.cpu0`), NICs
`nic<k>`; the network switch `net` is shared. Every physical connection is two directed `Link`s
(full duplex), so a route is a tuple of directed links and FlexFlow's simulator can treat each
link as a device (FlexFlow §5.1). Link ids are `node * links_per_node + local index`.

Routing: shortest path by `latency_s + REFERENCE_BYTES / bandwidth` over the node's vertices,
never through another device (CUDA peer-to-peer does not forward through a GPU). An inter-node
route is the best path from the source to the network (through one of its node's NICs) followed
by the best path from the network to the destination; with a non-blocking network the two halves
are independent, so both are computed once per local device on a node template. Where the network
has levels of switches, `net` stands for the leaf a NIC plugs into and cluster.switches adds the
links between switches; with rails the NIC matters, so `nic_paths` gives the best path out (or in)
through each NIC, never through the network or another device.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from stratagem.cluster.spec import (
    ClusterSpec, DeviceSpec, LinkSpec, MeshFabric, PCIeTreeFabric, SwitchFabric,
)

REFERENCE_BYTES = 1 << 20     # message size that weighs bandwidth against latency in routing
NETWORK = "net"


@dataclass(frozen=True)
class Link:
    id: int
    src: str
    dst: str
    kind: str                       # the fabric's name ("nvlink", "pcie", "net", ...)
    bandwidth_bytes_per_s: float    # this direction
    latency_s: float
    node: int

    @property
    def name(self) -> str:
        return f"{self.src}->{self.dst}"

    def __str__(self) -> str:
        return f"link{self.id}({self.name}, {self.bandwidth_bytes_per_s / 1e9:g} GB/s)"


@dataclass(frozen=True)
class Device:
    id: int
    node: int
    local_rank: int
    spec: DeviceSpec

    @property
    def kind(self) -> str:
        return self.spec.kind


@dataclass(frozen=True)
class Node:
    id: int
    devices: tuple[int, ...]


@dataclass(frozen=True)
class LocalLink:
    src: str
    dst: str
    kind: str
    link: LinkSpec


def build_local_links(spec: ClusterSpec) -> tuple[LocalLink, ...]:
    """The directed links of one node, in a fixed order (node 0's link ids)."""
    links: list[LocalLink] = []

    def connect(a: str, b: str, kind: str, link: LinkSpec) -> None:
        links.append(LocalLink(a, b, kind, link))
        links.append(LocalLink(b, a, kind, link))

    for fabric in spec.fabrics:
        if isinstance(fabric, MeshFabric):
            for (a, b), count in _merged_pairs(fabric.pairs).items():
                scaled = LinkSpec(fabric.link.bandwidth_bytes_per_s * count, fabric.link.latency_s)
                connect(f"d{a}", f"d{b}", fabric.name, scaled)
        elif isinstance(fabric, SwitchFabric):
            for i in range(spec.devices_per_node):
                connect(f"d{i}", fabric.name, fabric.name, fabric.link)
        elif isinstance(fabric, PCIeTreeFabric):
            _connect_tree(fabric, connect)
    if spec.network is not None:
        net = spec.network
        for k, vertex in enumerate(net.attach):
            local = f"d{vertex.split(':')[1]}" if vertex.startswith("device:") else vertex
            connect(local, f"nic{k}", "nic", net.attach_link or net.link)
            connect(f"nic{k}", NETWORK, "net", net.link)
    return tuple(links)


def _merged_pairs(pairs: tuple[tuple[int, int, int], ...]) -> dict[tuple[int, int], int]:
    merged: dict[tuple[int, int], int] = {}
    for a, b, count in pairs:
        key = (min(a, b), max(a, b))
        merged[key] = merged.get(key, 0) + count
    return merged


def _connect_tree(fabric: PCIeTreeFabric, connect) -> None:
    for k, devices in enumerate(fabric.switches):
        for i in devices:
            connect(f"d{i}", f"{fabric.name}.sw{k}", fabric.name, fabric.link)
    for s, switches in enumerate(fabric.sockets):
        for k in switches:
            connect(f"{fabric.name}.sw{k}", f"{fabric.name}.cpu{s}", fabric.name, fabric.link)
    for s in range(len(fabric.sockets)):
        for t in range(s + 1, len(fabric.sockets)):
            connect(f"{fabric.name}.cpu{s}", f"{fabric.name}.cpu{t}", f"{fabric.name}.socket",
                    fabric.socket_link)


class NodeTemplate:
    """Shortest paths inside one node, by local link index; shared by every node."""

    def __init__(self, spec: ClusterSpec):
        self.links = build_local_links(spec)
        self.num_devices = spec.devices_per_node
        self._out: dict[str, list[int]] = {}
        self._in: dict[str, list[int]] = {}
        for i, link in enumerate(self.links):
            self._out.setdefault(link.src, []).append(i)
            self._in.setdefault(link.dst, []).append(i)
        self._forward = [self._dijkstra(f"d{i}", reverse=False) for i in range(self.num_devices)]
        self._backward = [self._dijkstra(f"d{i}", reverse=True) for i in range(self.num_devices)]

    def _weight(self, i: int) -> float:
        link = self.links[i].link
        return link.latency_s + REFERENCE_BYTES / link.bandwidth_bytes_per_s

    def nic_paths(self, device: int, reverse: bool) -> dict[int, tuple[int, ...]]:
        """NIC k -> the best path from local `device` through NIC k to the network (reverse: from
        the network through NIC k to `device`), for each NIC it reaches inside the node."""
        paths = self._dijkstra(f"d{device}", reverse, through_network=False)
        found = {}
        for i, link in enumerate(self.links):
            nic = link.src if not reverse else link.dst
            other = link.dst if not reverse else link.src
            if other == NETWORK and nic.startswith("nic") and nic in paths:
                found[int(nic[3:])] = (i, *paths[nic]) if reverse else (*paths[nic], i)
        return found

    def _dijkstra(self, origin: str, reverse: bool, through_network: bool = True) -> dict[str, tuple[int, ...]]:
        """Paths (link indices, in travel order) from origin (or to it, when reverse)."""
        best: dict[str, tuple[int, ...]] = {}
        heap: list[tuple[float, int, str, tuple[int, ...]]] = [(0.0, 0, origin, ())]
        while heap:
            cost, hops, vertex, path = heapq.heappop(heap)
            if vertex in best:
                continue
            best[vertex] = path
            if vertex != origin and (vertex.startswith("d") and vertex[1:].isdigit()):
                continue      # devices do not forward
            if vertex == NETWORK and not through_network:
                continue
            edges = self._in.get(vertex, ()) if reverse else self._out.get(vertex, ())
            for i in edges:
                nxt = self.links[i].src if reverse else self.links[i].dst
                if nxt not in best:
                    new_path = (i, *path) if reverse else (*path, i)
                    heapq.heappush(heap, (cost + self._weight(i), hops + 1, nxt, new_path))
        return best

    def local_path(self, src: int, dst: int) -> tuple[int, ...] | None:
        return self._forward[src].get(f"d{dst}")

    def path_to_network(self, src: int) -> tuple[int, ...] | None:
        return self._forward[src].get(NETWORK)

    def path_from_network(self, dst: int) -> tuple[int, ...] | None:
        return self._backward[dst].get(NETWORK)
