"""What a cluster file says, as frozen values: devices, intra-node fabrics, the network, protocols.

A cluster is `num_nodes` identical nodes on a network: one non-blocking switch (a full-bisection
fat tree seen as a single switch), or levels of switches (`SwitchLevels`: leaf switches over blocks
of nodes, spine levels above them with an oversubscription ratio, optionally rail-optimized; see
cluster.switches for how routes climb them and what their links carry). A node holds
`devices_per_node` identical devices joined by fabrics: an NVLink point-to-point mesh
(`MeshFabric`: DGX-1's hybrid cube-mesh), a crossbar switch
(`SwitchFabric`: NVSwitch, or the loopback of processes on one CPU), or a PCIe switch tree
(`PCIeTreeFabric`: switches under CPU sockets joined by QPI/UPI). Each node has NICs attached to
devices (rail-aligned, one per GPU) or to host vertices (a PCIe switch or socket).

Bandwidths are per direction (links are full duplex); latencies are per hop.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class EfficiencyCurve:
    """Achieved fraction of peak as a function of work size (FLOPs or bytes).

    Breakpoints (size, efficiency) with size ascending; between breakpoints the efficiency is
    linear in log10(size); below the first and above the last it is constant. Calculon uses the
    same breakpoints as a step function (`systems/a100_80g.json`, `gflops_efficiency`); the
    log-linear form is continuous, so a search sees no cliff at a breakpoint.
    """

    points: tuple[tuple[float, float], ...]

    def at(self, size: float) -> float:
        sizes = [s for s, _ in self.points]
        if size <= sizes[0]:
            return self.points[0][1]
        if size >= sizes[-1]:
            return self.points[-1][1]
        i = bisect.bisect_right(sizes, size)
        (s0, e0), (s1, e1) = self.points[i - 1], self.points[i]
        fraction = (math.log10(size) - math.log10(s0)) / (math.log10(s1) - math.log10(s0))
        return e0 + (e1 - e0) * fraction


# Calculon's A100/H100 curves (calculon-ai/calculon systems/a100_80g.json, h100_80g_nvl8.json):
# matrix GFLOP {>=128: 0.95, >=16: 0.9, >=1: 0.6, >=0: 0.1}; vector GFLOP {>=16: 0.95, >=1: 0.5,
# >=0: 0.1}; memory MB {>=100: 0.9, >=10: 0.75, >=1: 0.6, >=0: 0.3}. Their "0" breakpoint is placed
# here at 1 MFLOP (matrix, vector) and 10 kB (memory) so that the log-linear curve is defined.
CALCULON_MATRIX = EfficiencyCurve(((1e6, 0.1), (1e9, 0.6), (16e9, 0.9), (128e9, 0.95)))
CALCULON_VECTOR = EfficiencyCurve(((1e6, 0.1), (1e9, 0.5), (16e9, 0.95)))
CALCULON_MEMORY = EfficiencyCurve(((1e4, 0.3), (1e6, 0.6), (1e7, 0.75), (1e8, 0.9)))


@dataclass(frozen=True)
class DeviceSpec:
    kind: str
    matrix_flops_per_s: tuple[tuple[str, float], ...]   # dtype -> peak of the matrix engine
    vector_flops_per_s: tuple[tuple[str, float], ...]   # dtype -> peak of elementwise units
    memory_bandwidth_bytes_per_s: float
    memory_bytes: float
    launch_overhead_s: float
    matrix_efficiency: EfficiencyCurve = CALCULON_MATRIX
    vector_efficiency: EfficiencyCurve = CALCULON_VECTOR
    memory_efficiency: EfficiencyCurve = CALCULON_MEMORY
    # dtype -> matrix-engine curve where it differs from `matrix_efficiency` (measured: small bf16
    # matmuls reach a smaller fraction of their much higher peak than float32 ones)
    matrix_efficiency_by_dtype: tuple[tuple[str, EfficiencyCurve], ...] = ()
    # a BLAS matrix product on tensor cores (bf16, fp16, TF32) with a row of an operand or of its
    # result that is no multiple of 4 bytes (an odd bf16 width: cost.compute.rows_aligned) runs at
    # this fraction of its curve; 1.0 where not measured
    unaligned_gemm_factor: float = 1.0
    # op kinds whose kernel on this device is fused and keeps none of what its record says the
    # CPU kernel keeps inside (`keeps_inside`): CUDA's RMSNorm keeps its input and 1/rms only,
    # where the CPU's also keeps x/rms for the weight's gradient (benchmarks/saved_probe.py)
    fused_kernels: tuple[str, ...] = ()

    def efficiency(self, dtype: str, matrix: bool) -> EfficiencyCurve:
        """The compute efficiency curve of the engine that runs `dtype` math."""
        if not matrix:
            return self.vector_efficiency
        for name, curve in self.matrix_efficiency_by_dtype:
            if name == dtype:
                return curve
        return self.matrix_efficiency

    def peak_flops_per_s(self, dtype: str, matrix: bool) -> float | None:
        """Peak for `dtype` on the matrix or vector engine; the 'default' entry if dtype is absent
        (and for TF32 math on a device without TF32, its float32 peak)."""
        table = dict(self.matrix_flops_per_s if matrix else self.vector_flops_per_s)
        fallback = table.get("float32") if dtype == "tfloat32" else None
        return table.get(dtype, table.get("default", fallback))


@dataclass(frozen=True)
class LinkSpec:
    bandwidth_bytes_per_s: float    # per direction
    latency_s: float                # per hop


@dataclass(frozen=True)
class MeshFabric:
    """Point-to-point links between device pairs: (local a, local b, number of links)."""

    name: str
    link: LinkSpec                  # one link; a pair with c links gets c times its bandwidth
    pairs: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True)
class SwitchFabric:
    """Every device joined to one crossbar vertex by one (aggregated) link."""

    name: str
    link: LinkSpec


@dataclass(frozen=True)
class PCIeTreeFabric:
    """Devices under PCIe switches, switches under CPU sockets, sockets joined pairwise."""

    name: str
    link: LinkSpec                             # device-switch and switch-socket links
    switches: tuple[tuple[int, ...], ...]      # local devices under each switch
    sockets: tuple[tuple[int, ...], ...]       # switch indices under each socket
    socket_link: LinkSpec | None = None        # QPI/UPI between sockets


Fabric = MeshFabric | SwitchFabric | PCIeTreeFabric


@dataclass(frozen=True)
class SwitchLevel:
    """One level of switches between nodes, counted in nodes, not in devices or links.

    `nodes`: how many consecutive nodes one switch of this level reaches (its block), None at the
    top level (it joins them all). `oversubscription`: the links from each switch of the level
    below up to this level carry 1/ratio of what that switch has towards the nodes (1: non-blocking;
    4: a 4:1 leaf). `latency_s`: one hop on those links. The first (leaf) level has no level below:
    its hop is the NIC's link, and its ratio and latency are unused.
    """

    name: str
    nodes: int | None
    oversubscription: float = 1.0
    latency_s: float = 0.0


@dataclass(frozen=True)
class SwitchLevels:
    """Switch levels between nodes, leaf first; the last joins every node. `rails`: NIC k of every
    node of a leaf block is on that block's leaf switch k (rail-optimized), else a block's NICs
    share one leaf switch."""

    levels: tuple[SwitchLevel, ...]
    rails: bool = False


@dataclass(frozen=True)
class NetworkSpec:
    """NICs per node, where each hangs (a device for rail-aligned NICs, or a host vertex), and the
    switches between nodes (None: one non-blocking switch)."""

    nics_per_node: int
    link: LinkSpec                   # NIC <-> network switch (the leaf, when there are levels)
    attach: tuple[str, ...]          # per NIC: "device:<local>" or a fabric vertex ("pcie.sw0")
    attach_link: LinkSpec | None     # device <-> NIC (GPUDirect through PCIe), when on devices
    switches: SwitchLevels | None = None


@dataclass(frozen=True)
class Protocol:
    """A collective protocol's cost factors, after NCCL's Simple / LL128 / LL (tuning.cc)."""

    name: str
    base_latency_s: float       # once per collective
    latency_scale: float        # multiplies the per-hop latencies of the links
    bandwidth_factor: float     # fraction of the link bandwidth the protocol reaches


# NCCL ~2.19 src/graph/tuning.cc: baseLat Ring {LL 6.6, LL128 14.0, Simple 8.4} us; hwLat scales
# of LL and LL128 relative to Simple (NVLink 0.6/1.9/3.4, NET 2.7/4.0/14 us) are about 0.2 and 0.5;
# bandwidth: LL128 x0.92, LL x0.5 (PyTorch 2.13's port of the model; NCCL itself uses 1/4 to 1/3).
NCCL_PROTOCOLS = (
    Protocol("simple", 8.4e-6, 1.0, 1.0),
    Protocol("ll128", 14.0e-6, 0.5, 0.92),
    Protocol("ll", 6.6e-6, 0.2, 0.5),
)


@dataclass(frozen=True)
class HostSpec:
    """The host each device's process runs on, as offloading to it sees it (the "offloaded" weight
    state, cost.weight_state): `link`, each device's own link to host memory (PCIe; per direction,
    copies of pinned memory); `optimizer_bytes_per_s`, the optimizer traffic (cost.memory.Optimizer
    .update_traffic_per_element) one device's process steps per second on the host CPU, its share
    of the node's cores; `memory_bytes`, the node's host memory."""

    link: LinkSpec
    optimizer_bytes_per_s: float
    memory_bytes: float


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    description: str
    num_nodes: int
    devices_per_node: int
    device: DeviceSpec
    fabrics: tuple[Fabric, ...]
    network: NetworkSpec | None
    protocols: tuple[Protocol, ...] = NCCL_PROTOCOLS
    reduction_s_per_byte: float = 0.0     # gamma: time to reduce one byte (0: fused into copies)
    # Whether a rank computes while its collectives run. False (stratagem.runtime's way on every
    # backend: DTensor's redistribute with async_op=False makes the rank, or its compute stream,
    # wait for each collective): a communication task holds its group's devices as well as its
    # links. True: a dataflow runtime (FlexFlow's Legion) overlaps them where dependencies allow.
    overlap_compute: bool = False
    # Whether a shard-to-shard move (S(a) -> S(b) on one mesh axis) runs as an all-to-all. False
    # where the backend has none and DTensor falls back to all-gather + chunk (gloo on CPU: "CPU
    # process group does not support alltoall yet, falling back with allgather + chunk"): the
    # whole tensor along that axis is gathered, moved and held for the step.
    native_all_to_all: bool = True
    # measured tables the cluster file names (absolute paths): op times (`stratagem profile ops`),
    # read by the cost model; collective times (`profile comm`), read by the cluster
    ops_table: str | None = None
    comm_table: str | None = None
    host: HostSpec | None = None          # None: nothing is offloaded to the host

    @property
    def num_devices(self) -> int:
        return self.num_nodes * self.devices_per_node
