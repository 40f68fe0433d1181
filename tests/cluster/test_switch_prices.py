"""Collectives and transfers over switch levels, against prices derived by hand from the figures:
what a leaf's oversubscribed uplinks cost when a group spans leaves, what they do not cost when it
stays inside one, and the latency of each level's hops.

The toy clusters (tests/cluster/helpers.leaf_spine_cluster) have one-device nodes unless said
otherwise, NICs of B = 10 GB/s, and the plain protocol (no base latency, full bandwidth), so a
collective's time is steps * alpha + v(p) * n / bandwidth with the bandwidth of its busiest link.
"""

from __future__ import annotations

import pytest

from stratagem.cluster import collectives
from tests.cluster.helpers import leaf_spine_cluster, switch_cluster

GiB = 1 << 30
B = 10e9


def no_switches(nodes: int, devices: int = 1):
    """The same nodes and NICs on one non-blocking switch (the file without `switches`)."""
    return switch_cluster(devices, 1e12, 0.0, nodes=nodes, nic_bandwidth=B)


def test_groups_across_leaves_pay_the_oversubscription_that_groups_inside_one_do_not():
    # 2 leaves of 4 nodes, 4:1: a leaf's uplinks carry 4 nodes x B / 4 = B. Four pairs across the
    # leaves at once put 4 flows on it: B / 4 each; four pairs inside leaves never leave them.
    cluster = leaf_spine_cluster(8, 1, 4, oversubscription=4.0)
    inside = [(0, 1), (2, 3), (4, 5), (6, 7)]
    across = [(0, 4), (1, 5), (2, 6), (3, 7)]
    ring = 2 * (2 - 1) / 2                                              # v(p) of a ring all-reduce, p = 2
    assert cluster.concurrent_collective_time_s("all_reduce", GiB, inside) == pytest.approx(ring * GiB / B, rel=1e-12)
    assert cluster.concurrent_collective_time_s("all_reduce", GiB, across) == pytest.approx(
        ring * GiB / (B / 4), rel=1e-12)
    # ignoring the levels (one non-blocking switch) would price the pairs across leaves 4x too low
    flat = no_switches(8).concurrent_collective_time_s("all_reduce", GiB, across)
    assert cluster.concurrent_collective_time_s("all_reduce", GiB, across) == pytest.approx(4 * flat, rel=1e-12)


def test_the_slowdown_follows_the_load_on_the_uplinks():
    # One pair across alone: 1 flow on uplinks of B (4 x B / 4): not slowed (ECMP spreads what one
    # NIC sends over uplinks that together carry as much). Two pairs: 2 flows, B / 2 each.
    cluster = leaf_spine_cluster(8, 1, 4, oversubscription=4.0)
    assert cluster.concurrent_collective_time_s("all_reduce", GiB, [(0, 4)]) == pytest.approx(GiB / B, rel=1e-12)
    assert cluster.concurrent_collective_time_s("all_reduce", GiB, [(0, 4), (1, 5)]) == pytest.approx(
        GiB / (B / 2), rel=1e-12)


def test_one_ring_over_two_small_leaves_is_slowed_by_their_uplinks():
    # Leaves of 2 nodes at 4:1: uplinks of 2 x B / 4 = B / 2. A ring over nodes 0..3 crosses each
    # leaf's uplinks once each way: bandwidth B / 2 against B without the levels, so twice the time.
    p, cluster = 4, leaf_spine_cluster(4, 1, 2, oversubscription=4.0)
    estimate = cluster.collective_estimate("all_reduce", GiB, [range(p)])
    assert estimate.algorithm == "ring"
    assert estimate.time_s == pytest.approx(2 * (p - 1) / p * GiB / (B / 2), rel=1e-12)
    assert estimate.time_s == pytest.approx(2 * no_switches(4).collective_time_s("all_reduce", GiB, range(p)),
                                            rel=1e-12)
    # leaves of 4 nodes: uplinks of B, as fast as a NIC: a ring over the two leaves is not slowed
    big = leaf_spine_cluster(8, 1, 4, oversubscription=4.0)
    assert big.collective_time_s("all_reduce", GiB, range(8)) == pytest.approx(
        no_switches(8).collective_time_s("all_reduce", GiB, range(8)), rel=1e-12)


def test_latency_is_counted_per_hop_per_level():
    nic, spine, pod, core = 1e-6, 3e-6, 2e-6, 5e-6
    cluster = leaf_spine_cluster(8, 1, 4, nic_latency_s=nic, spine_latency_s=spine)
    one_byte, bandwidth_term = 1, 1 / B
    # ring all-reduce of 2: 2 (p - 1) = 2 steps of the route's latency
    assert cluster.collective_time_s("all_reduce", one_byte, (0, 1)) == pytest.approx(
        2 * (2 * nic) + bandwidth_term, rel=1e-9)
    assert cluster.collective_time_s("all_reduce", one_byte, (0, 4)) == pytest.approx(
        2 * (2 * nic + 2 * spine) + bandwidth_term, rel=1e-9)
    levels = [{"name": "leaf", "nodes": 2}, {"name": "pod", "nodes": 4, "latency_s": pod},
              {"name": "core", "latency_s": core}]
    deep = leaf_spine_cluster(8, 1, 2, nic_latency_s=nic, levels=levels)
    assert deep.route_latency_s(0, 1) == pytest.approx(2 * nic)
    assert deep.route_latency_s(0, 2) == pytest.approx(2 * nic + 2 * pod)
    assert deep.route_latency_s(0, 4) == pytest.approx(2 * nic + 2 * pod + 2 * core)


def test_transfers_across_leaves_share_the_uplinks():
    # Each node of leaf 0 sends m bytes to a node of leaf 1 at once: 4 m over uplinks of B.
    cluster = leaf_spine_cluster(8, 1, 4, oversubscription=4.0)
    m = 1e8
    assert cluster.transfers_time_s([(0, 4, m)]) == pytest.approx(m / B, rel=1e-12)
    assert cluster.transfers_time_s([(i, 4 + i, m) for i in range(4)]) == pytest.approx(4 * m / B, rel=1e-12)
    assert cluster.transfers_time_s([(0, 1, m), (2, 3, m)]) == pytest.approx(m / B, rel=1e-12)


@pytest.mark.parametrize("counted", [False, True])
def test_all_to_all_over_two_leaves(monkeypatch, counted):
    # p = 8, weight 1/7 per pair. Leaf 0's uplinks (B at 4:1) carry its 4 x 4 pairs to leaf 1:
    # 16/7, so each unit of weight gets 7 B / 16; a NIC carries 7 x 1/7 = 1 (B). Bottleneck 7 B / 16.
    if counted:
        monkeypatch.setattr(collectives, "PAIRWISE_FLOWS", 0)         # count the loads by class
    p, cluster = 8, leaf_spine_cluster(8, 1, 4, oversubscription=4.0)
    t = cluster.collective_time_s("all_to_all", GiB, range(p))
    assert t == pytest.approx((p - 1) / p * GiB / (7 * B / 16), rel=1e-12)
    assert t == pytest.approx(16 / 7 * no_switches(8).collective_time_s("all_to_all", GiB, range(p)), rel=1e-12)


def test_broadcast_across_leaves():
    # Chain 0 -> 1 -> ... -> 7 crosses leaf 0's uplinks once: with leaves of 2 at 4:1 (B / 2), the
    # pipelined chain moves n at B / 2; a tree does no better here.
    cluster = leaf_spine_cluster(8, 1, 2, oversubscription=4.0)
    estimate = cluster.collective_estimate("broadcast", GiB, [range(8)])
    assert estimate.time_s == pytest.approx(GiB / (B / 2), rel=1e-12)


def test_rails_keep_a_leaf_blocks_hierarchical_all_reduce_off_the_spine():
    # 4 nodes x 2 devices, rail leaves of 2 nodes. Inside one block the inter-node phase runs on
    # each rail (devices 0, 2 and 1, 3): never on the spine, so the ratio does not matter; across
    # blocks each rail's ring crosses its leaf's uplinks (2 x B / 4 = B / 2): slower at 4:1.
    def price(ratio, group):
        cluster = leaf_spine_cluster(4, 2, 2, oversubscription=ratio, rails=True)
        return cluster.collective_estimate("all_reduce", GiB, [group])
    block, both = range(4), range(8)
    assert price(4.0, block).algorithm.startswith("hierarchical")
    assert price(4.0, block).time_s == price(1.0, block).time_s
    assert price(4.0, both).time_s > price(1.0, both).time_s


def test_with_rails_a_ring_across_nodes_enters_each_node_on_the_rail_it_left_by():
    cluster = leaf_spine_cluster(2, 4, 2, oversubscription=4.0, rails=True)
    (order, _), = cluster.ring_channels(tuple(range(8)))
    crossings = [(a, b) for a, b in zip(order, (*order[1:], order[0])) if a // 4 != b // 4]
    assert all(a % 4 == b % 4 for a, b in crossings)                # the same NIC index on both sides
    assert all(link.kind != "spine" for a, b in crossings for link in cluster.route(a, b))
