"""All-to-all loads counted by class (cluster.alltoall) equal the loads of its p (p - 1) flows, on
flat and switched clusters, with and without rails, for single and concurrent groups."""

from __future__ import annotations

import numpy as np
import pytest

from stratagem.cluster import collectives, load
from stratagem.cluster.alltoall import all_to_all_usage
from stratagem.cluster.patterns import pairwise_flows
from tests.cluster.helpers import leaf_spine_cluster, switch_cluster

THREE_LEVELS = [{"name": "leaf", "nodes": 2},
                {"name": "pod", "nodes": 4, "oversubscription": 2, "latency_s": 2e-6},
                {"name": "core", "oversubscription": 3, "latency_s": 5e-6}]
CLUSTERS = {
    "leaf-spine": lambda: leaf_spine_cluster(8, 4, 2, 4.0, nic_latency_s=1e-6, spine_latency_s=3e-6),
    "rails": lambda: leaf_spine_cluster(8, 4, 2, 4.0, nic_latency_s=1e-6, spine_latency_s=3e-6, rails=True),
    "three-levels": lambda: leaf_spine_cluster(12, 2, 2, nic_latency_s=1e-6, levels=THREE_LEVELS),
    "three-levels-rails": lambda: leaf_spine_cluster(12, 2, 2, nic_latency_s=1e-6, rails=True, levels=THREE_LEVELS),
    "h100-4x8": lambda: load("h100-4x8"),
    "k80-16x4": lambda: load("k80-16x4"),
    "one-nic-per-node": lambda: switch_cluster(4, 1e11, 1e-6, nodes=3, nic_bandwidth=1e10, nic_latency_s=2e-6,
                                               nics="one"),
}


def flows_usage(cluster, groups):
    flows = [flow for group in groups for flow in pairwise_flows(group)]
    src, dst, weights = (np.array(column) for column in zip(*flows))
    return cluster.link_usage(src, dst, weights.astype(float))


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_counted_loads_equal_the_flows_loads(name):
    cluster, rng = CLUSTERS[name](), np.random.default_rng(11)
    n = cluster.num_devices
    for _ in range(25):
        count = int(rng.choice([1, 1, 2, 3]))
        size = int(rng.integers(2, max(3, n // count + 1)))
        devices = rng.permutation(n)[:count * size]
        groups = tuple(sorted(tuple(sorted(int(d) for d in devices[i * size:(i + 1) * size])) for i in range(count)))
        by_flows, counted = flows_usage(cluster, groups), all_to_all_usage(cluster.routes, groups)
        assert np.array_equal(by_flows.links, counted.links), groups
        np.testing.assert_allclose(counted.loads, by_flows.loads, rtol=1e-12)
        assert counted.latency_s == pytest.approx(by_flows.latency_s, rel=1e-12), groups


def test_large_groups_are_counted_and_priced_alike(monkeypatch):
    cluster = CLUSTERS["rails"]()
    groups = [tuple(range(16)), tuple(range(16, 32))]
    by_flows = cluster.collective_estimate("all_to_all", 1 << 26, groups)
    monkeypatch.setattr(collectives, "PAIRWISE_FLOWS", 0)
    counted = cluster.with_comm_table(None).collective_estimate("all_to_all", 1 << 26, groups)
    assert counted.time_s == pytest.approx(by_flows.time_s, rel=1e-12)


def test_all_to_all_over_16384_gpus_is_priced():
    cluster = load("h100-2048x8-leafspine")
    estimate = cluster.collective_estimate("all_to_all", 1 << 30, [range(cluster.num_devices)])
    # each GPU sends (p-1)/p of 1 GiB; at best at its NIC's 48.5 GB/s
    assert estimate.time_s > (cluster.num_devices - 1) / cluster.num_devices * (1 << 30) / 48.5e9
