"""Clusters: devices, nodes, links and routes, and the time of collectives on them.

    cluster = stratagem.cluster.load("v100-2x8")        # a preset, or a YAML/JSON file path
    cluster.devices, cluster.node_of(d), cluster.route(src, dst)
    cluster.collective_time_s("all_reduce", num_bytes, group)
    cluster.concurrent_collective_time_s("all_reduce", num_bytes, groups)

A cluster file may describe levels of switches between its nodes (leaves, spines with an
oversubscription ratio, rails: `network.switches`, cluster.switches); routes and prices follow them.

The planner core: this package does not import torch.
"""

from __future__ import annotations

from pathlib import Path

from stratagem.cluster.cluster import HOST_TRANSFERS, Cluster
from stratagem.cluster.collectives import KINDS, Estimate
from stratagem.cluster.comm_table import CommTable, normalize_groups
from stratagem.cluster.loader import cluster_data, load_spec, parse_spec, preset_names, with_tables
from stratagem.cluster.spec import ClusterSpec, DeviceSpec, EfficiencyCurve
from stratagem.cluster.topology import Device, Link, Node


def load(name_or_path: str | Path, comm_table: CommTable | str | Path | None = None) -> Cluster:
    """A preset name (`v100-2x8`, `h100-4x8`, `cpu-1x2`) or a .yaml/.json file -> Cluster, with the
    collective table given, else the one its file names."""
    spec = load_spec(name_or_path)
    comm_table = comm_table if comm_table is not None else spec.comm_table
    if comm_table is not None and not isinstance(comm_table, CommTable):
        comm_table = CommTable.load(comm_table)
    return Cluster(spec, comm_table)


__all__ = ["HOST_TRANSFERS", "KINDS", "Cluster", "ClusterSpec", "CommTable", "Device", "DeviceSpec", "EfficiencyCurve",
           "Estimate", "Link", "Node", "cluster_data", "load", "load_spec", "normalize_groups", "parse_spec",
           "preset_names", "with_tables"]


class _CallableModule(type(__import__("sys"))):
    """`stratagem.cluster("v100-2x8")` (DESIGN.md's `sg.cluster`) is `stratagem.cluster.load`:
    the package stays importable, and calling it loads a cluster."""

    def __call__(self, name_or_path: str | Path, comm_table: CommTable | str | Path | None = None) -> Cluster:
        return load(name_or_path, comm_table)


__import__("sys").modules[__name__].__class__ = _CallableModule
