"""Small hand-made clusters whose collective times have closed forms."""

from __future__ import annotations

from stratagem.cluster import Cluster, parse_spec

DEVICE = {"kind": "toy", "matrix_flops_per_s": {"float32": 1e12}, "vector_flops_per_s": {"float32": 1e11},
          "memory_bandwidth_bytes_per_s": 1e11, "memory_bytes": 1e10, "launch_overhead_s": 1e-6}
PLAIN = [{"name": "plain", "base_latency_s": 0.0, "latency_scale": 1.0, "bandwidth_factor": 1.0}]


def switch_cluster(devices: int, bandwidth: float, hop_latency_s: float, nodes: int = 1,
                   nic_bandwidth: float | None = None, nic_latency_s: float = 0.0,
                   nics: str = "devices", gamma: float = 0.0) -> Cluster:
    """`nodes` nodes of `devices` devices on one crossbar; NICs per device or one per node."""
    data = {"name": "toy", "nodes": nodes, "devices_per_node": devices, "device": DEVICE,
            "fabrics": [{"type": "switch", "name": "xbar",
                         "link": {"bandwidth_bytes_per_s": bandwidth, "latency_s": hop_latency_s}}],
            "collectives": {"protocols": PLAIN, "reduction_s_per_byte": gamma}}
    if nodes > 1:
        link = {"bandwidth_bytes_per_s": nic_bandwidth, "latency_s": nic_latency_s}
        per_device = nics == "devices"
        data["network"] = {"nics_per_node": devices if per_device else 1,
                           "attach": "devices" if per_device else ["xbar"], "link": link,
                           "attach_link": {"bandwidth_bytes_per_s": 1e15, "latency_s": 0.0}}
    return Cluster(parse_spec(data, "toy"))


def leaf_spine_cluster(nodes: int, devices: int, leaf_nodes: int, oversubscription: float = 1.0,
                       nic_bandwidth: float = 10e9, nic_latency_s: float = 0.0, spine_latency_s: float = 0.0,
                       rails: bool = False, levels: list | None = None, bandwidth: float = 1e12,
                       hop_latency_s: float = 0.0) -> Cluster:
    """`nodes` nodes of `devices` devices (one crossbar each, one NIC per device on a link of
    unlimited bandwidth), leaves of `leaf_nodes` nodes under one spine; or the `levels` given."""
    data = {"name": "toy-leafspine", "nodes": nodes, "devices_per_node": devices, "device": DEVICE,
            "fabrics": [{"type": "switch", "name": "xbar",
                         "link": {"bandwidth_bytes_per_s": bandwidth, "latency_s": hop_latency_s}}],
            "network": {"nics_per_node": devices, "attach": "devices",
                        "link": {"bandwidth_bytes_per_s": nic_bandwidth, "latency_s": nic_latency_s},
                        "attach_link": {"bandwidth_bytes_per_s": 1e15, "latency_s": 0.0},
                        "switches": {"rails": rails, "levels": levels or [
                            {"name": "leaf", "nodes": leaf_nodes},
                            {"name": "spine", "oversubscription": oversubscription,
                             "latency_s": spine_latency_s}]}},
            "collectives": {"protocols": PLAIN}}
    return Cluster(parse_spec(data, "toy-leafspine"))
