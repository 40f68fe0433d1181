"""The one pricing rule for moving bytes (cluster.usage): loads summed over the flows that cross a
link, the busiest link, the slowest route; collectives and transfers both price through it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cluster.helpers import leaf_spine_cluster, switch_cluster


def test_loads_bottleneck_and_latency_by_hand():
    # two nodes of two devices, one NIC each (10 GB/s, 2 us); both devices of node 0 send to node 1
    cluster = switch_cluster(2, 100e9, 1e-6, nodes=2, nic_bandwidth=10e9, nic_latency_s=2e-6, nics="one")
    usage = cluster.link_usage(np.array([0, 1]), np.array([2, 3]), np.array([1.0, 3.0]))
    nic_up = [link.id for link in cluster.route(0, 2) if link.src == "n0.nic0"]
    assert usage.loads[list(usage.links).index(nic_up[0])] == 4.0
    assert usage.bottleneck_bandwidth() == pytest.approx(10e9 / 4)
    assert usage.busiest_time_s() == pytest.approx(4 / 10e9)
    assert usage.latency_s == pytest.approx(cluster.route_latency_s(0, 2))


def test_transfers_and_collectives_agree_on_the_busiest_link():
    cluster = leaf_spine_cluster(8, 1, 4, oversubscription=4.0)
    m = 1e9
    # a send/recv pair is one flow: the transfer and the collective see the same link
    assert cluster.transfers_time_s([(0, 4, m)]) == pytest.approx(
        cluster.collective_time_s("send_recv", m, (0, 4)), rel=1e-12)


def test_no_flows_cost_nothing():
    cluster = switch_cluster(2, 100e9, 1e-6)
    usage = cluster.link_usage(np.array([], dtype=int), np.array([], dtype=int), np.array([]))
    assert usage.bottleneck_bandwidth() == float("inf") and usage.busiest_time_s() == 0.0
    assert cluster.transfers_time_s([(0, 0, 1e9), (0, 1, 0)]) == 0.0


def _links_pair_by_pair(cluster, kind, groups):
    """The oracle: every pair's route found alone (Cluster.route_ids), their links' union."""
    links = set()
    for group in groups:
        pairs = [group] if kind == "p2p" else [(group[i], group[(i + 1) % len(group)]) for i in range(len(group))]
        for src, dst in pairs:
            if src != dst:
                links.update(cluster.route_ids(src, dst))
    return tuple(sorted(links))


@pytest.mark.parametrize("make", [
    lambda: leaf_spine_cluster(8, 4, 2, oversubscription=2.0, rails=True),
    lambda: leaf_spine_cluster(6, 2, 4),
    lambda: switch_cluster(4, 100e9, 1e-6, nodes=3, nic_bandwidth=10e9, nic_latency_s=2e-6, nics="one"),
    lambda: __import__("stratagem.cluster", fromlist=["load"]).load("h100-2048x8-leafspine"),
])
def test_a_steps_links_are_its_routes_links_found_all_at_once(make):
    """step_link_ids takes every ring or pair route from the route table's rows at once: the same
    links as routing each pair alone, on nodes, rails and leaf/spine switches."""
    cluster = make()
    rng = np.random.default_rng(3)
    n = cluster.num_devices
    for _ in range(20):
        size = int(rng.integers(2, min(n, 64) + 1))
        devices = rng.choice(n, size=size, replace=False)
        parts = int(rng.integers(1, 4))
        groups = tuple(tuple(int(d) for d in part) for part in np.array_split(devices, parts) if len(part))
        pairs = tuple((int(a), int(b)) for a, b in rng.integers(0, n, size=(3, 2)))
        for kind, found in (("all_reduce", groups), ("all_gather", groups[:1]), ("p2p", pairs)):
            assert cluster.step_link_ids(kind, found).tolist() == list(_links_pair_by_pair(cluster, kind, found))
    assert cluster.step_link_ids("all_reduce", ((0,),)).size == 0
    assert not cluster.step_link_ids(kind, found).flags.writeable       # cached: shared by every caller
