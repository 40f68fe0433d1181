"""`stratagem clusters [NAME]`: list cluster presets, or describe one with sample collective times."""

from __future__ import annotations

import argparse

from stratagem.cluster import Cluster, load, preset_names

GiB = 1 << 30
SAMPLE_SIZES = (1 << 10, 1 << 20, 1 << 24, 1 << 28, GiB)
FAMILY_EXAMPLE = {"N": "2"}     # family presets are shown with N = 2


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="a preset name or cluster file to describe")


def run(args: argparse.Namespace) -> int:
    if args.name:
        print(describe(load(args.name)))
        return 0
    rows = [("PRESET", "DEVICES", "DEVICE", "MEMORY", "PEAK", "NODE BUSBW", "NIC BW/NODE", "ABOUT")]
    for name in preset_names():
        example = name.replace("N", FAMILY_EXAMPLE["N"])
        rows.append((name, *summary(load(example))))
    print(table(rows))
    print("\nFamilies ending in N take any count (shown with N = 2). NODE BUSBW: ring all-reduce bus"
          "\nbandwidth of 1 GiB over one node; NIC BW/NODE: total NIC bandwidth of a node.")
    return 0


def summary(cluster: Cluster) -> tuple[str, ...]:
    spec, device = cluster.spec, cluster.spec.device
    peak = max(v for _, v in device.matrix_flops_per_s)
    nics = spec.network.nics_per_node * spec.network.link.bandwidth_bytes_per_s if spec.network else 0
    return (f"{spec.num_nodes}x{spec.devices_per_node}", device.kind, f"{device.memory_bytes / GiB:.0f} GiB",
            f"{peak / 1e12:.3g} TF", _gbps(node_bus_bandwidth(cluster)), _gbps(nics), spec.description)


def node_bus_bandwidth(cluster: Cluster) -> float:
    group = cluster.nodes[0].devices
    p = len(group)
    if p < 2:
        return 0.0
    return 2 * (p - 1) / p * GiB / cluster.collective_time_s("all_reduce", GiB, group)


def describe(cluster: Cluster) -> str:
    spec = cluster.spec
    lines = [f"{spec.name}: {spec.description}", f"  {spec.num_nodes} node(s) x {spec.devices_per_node} "
             f"{spec.device.kind}; {len(cluster.links)} directed links", "  links of node 0:"]
    lines += [f"    {link}" for link in cluster.links if link.node == 0]
    groups = [("node", cluster.nodes[0].devices), ("cluster", tuple(range(cluster.num_devices)))]
    rows = [("COLLECTIVE", "GROUP", *(_size(n) for n in SAMPLE_SIZES))]
    for kind in ("all_reduce", "all_gather", "all_to_all"):
        for label, group in groups[: 1 if spec.num_nodes == 1 else 2]:
            times = [cluster.collective_estimate(kind, n, [group]) for n in SAMPLE_SIZES]
            rows.append((kind, f"{label} ({len(group)})", *(f"{e.time_s * 1e6:.1f} us" for e in times)))
    return "\n".join(lines) + "\n\n" + table(rows)


def table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def _gbps(bandwidth: float) -> str:
    return f"{bandwidth / 1e9:.1f} GB/s" if bandwidth else "-"


def _size(n: int) -> str:
    return f"{n >> 30} GiB" if n >= GiB else f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
