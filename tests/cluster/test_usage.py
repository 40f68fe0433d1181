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
