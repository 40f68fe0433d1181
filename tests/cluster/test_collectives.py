"""Collective times against the closed forms of the reference sheet (§3.2)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratagem.cluster import load
from tests.cluster.helpers import switch_cluster

GiB = 1 << 30


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15)


@settings(max_examples=40, deadline=None)
@given(p=st.integers(2, 8), n=st.integers(1, 1 << 32), bw=st.floats(1e9, 1e12), hop=st.floats(0, 1e-5))
def test_ring_all_reduce_closed_form(p, n, bw, hop):
    cluster = switch_cluster(p, bw, hop)
    alpha = 2 * hop      # device -> switch -> device
    expected = 2 * (p - 1) * alpha + 2 * (p - 1) / p * n / bw
    estimate = cluster.collective_estimate("all_reduce", n, [range(p)])
    assert estimate.algorithm == "ring"
    assert close(estimate.time_s, expected)


@settings(max_examples=30, deadline=None)
@given(p=st.integers(2, 8), n=st.integers(1, 1 << 32), bw=st.floats(1e9, 1e12), hop=st.floats(0, 1e-5))
def test_other_collectives_closed_forms(p, n, bw, hop):
    cluster = switch_cluster(p, bw, hop)
    alpha, group = 2 * hop, list(range(p))
    ag = (p - 1) * alpha + (p - 1) / p * n / bw
    assert close(cluster.collective_time_s("all_gather", n, group), ag)
    assert close(cluster.collective_time_s("reduce_scatter", n, group), ag)
    assert close(cluster.collective_time_s("all_to_all", n, group), ag)
    assert close(cluster.collective_time_s("broadcast", n, group), (p - 1) * alpha + n / bw)
    assert close(cluster.collective_time_s("send_recv", n, group[:2]), alpha + n / bw)


def test_reduction_term_gamma():
    p, n, bw, gamma = 4, 1 << 24, 1e10, 1e-10
    cluster = switch_cluster(p, bw, 0.0, gamma=gamma)
    expected = (p - 1) / p * n / bw + (p - 1) / p * n * gamma
    assert close(cluster.collective_time_s("reduce_scatter", n, range(p)), expected)
    assert close(cluster.collective_time_s("all_gather", n, range(p)), (p - 1) / p * n / bw)


def test_small_messages_are_latency_bound():
    cluster = switch_cluster(8, 1e11, 2e-6)
    tiny = cluster.collective_time_s("all_reduce", 8, range(8))
    assert tiny == pytest.approx(2 * 7 * 4e-6, rel=1e-3)      # 2(p-1) alpha, bandwidth negligible


def test_hierarchical_all_reduce_formula():
    g, nodes, b1, b2, hop1, hop2 = 4, 2, 200e9, 10e9, 1e-6, 5e-6
    cluster = switch_cluster(g, b1, hop1, nodes=nodes, nic_bandwidth=b2, nic_latency_s=hop2)
    n = GiB
    a1, a2 = 2 * hop1, 2 * hop2
    intra = (g - 1) * a1 + (g - 1) / g * n / b1
    inter = 2 * (nodes - 1) * a2 + 2 * (nodes - 1) / nodes * (n / g) / b2
    estimate = cluster.collective_estimate("all_reduce", n, [range(g * nodes)])
    assert estimate.algorithm.startswith("hierarchical")
    assert close(estimate.time_s, intra + inter + intra)
    flat_ring = 2 * (g * nodes - 1) / (g * nodes) * n / b2      # one NIC on the ring's path
    assert estimate.time_s < flat_ring


def test_contention_on_a_shared_nic_but_not_on_separate_rails():
    shared = switch_cluster(4, 100e9, 0.0, nodes=2, nic_bandwidth=10e9, nics="one")
    rails = switch_cluster(4, 100e9, 0.0, nodes=2, nic_bandwidth=10e9, nics="devices")
    n, pairs = 1 << 26, [(0, 4), (1, 5)]
    for cluster, slowdown in ((shared, 2.0), (rails, 1.0)):
        alone = cluster.collective_time_s("all_reduce", n, pairs[0])
        together = cluster.concurrent_collective_time_s("all_reduce", n, pairs)
        assert together == pytest.approx(slowdown * alone, rel=1e-9)


def test_contention_on_pcie_switch_uplinks():
    cluster = load("k80-16x4")       # GPU pairs (0,1) and (2,3) under separate PCIe switches
    n = 1 << 26
    across = cluster.concurrent_collective_time_s("all_reduce", n, [(0, 2), (1, 3)])
    assert across > 1.9 * cluster.collective_time_s("all_reduce", n, (0, 2))
    inside = cluster.concurrent_collective_time_s("all_reduce", n, [(0, 1), (2, 3)])
    assert inside == pytest.approx(cluster.collective_time_s("all_reduce", n, (0, 1)))


def test_dgx1_rings_use_all_six_nvlinks():
    cluster = load("v100-2x8")
    shares = [share for _, share in cluster.ring_channels(tuple(range(8)))]
    assert sorted(shares) == pytest.approx([1 / 6, 1 / 6, 1 / 3, 1 / 3])
    n = 4 * GiB
    t = cluster.collective_time_s("all_reduce", n, range(8))
    bus_bandwidth = 2 * 7 / 8 * n / t
    assert bus_bandwidth == pytest.approx(120e9, rel=0.01)    # 6 links x 20 GB/s (NCCL SM70)


def test_reference_sheet_nccl_model_within_tolerance():
    # PyTorch 2.13's NCCL model outputs (reference sheet §3.6), single node: within 5 %.
    cases = [("a100-1x8", 1 << 28, 2013e-6), ("a100-1x8", GiB, 7885e-6), ("h100-1x8", 1 << 24, 125e-6),
             ("h100-1x8", GiB, 5135e-6)]
    for name, n, expected in cases:
        assert load(name).collective_time_s("all_reduce", n, range(8)) == pytest.approx(expected, rel=0.05)


@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"]),
       p=st.sampled_from([2, 4, 8, 16]), n=st.integers(1, 1 << 30))
def test_time_grows_with_size_and_concurrency_never_helps(kind, p, n):
    cluster = load("v100-2x8")
    group = list(range(p))
    assert cluster.collective_time_s(kind, 2 * n, group) >= cluster.collective_time_s(kind, n, group)
    if p <= 8:
        shifted = [d + 8 for d in group]
        alone = cluster.collective_time_s(kind, n, group)
        assert cluster.concurrent_collective_time_s(kind, n, [group, shifted]) >= alone * (1 - 1e-12)


def test_single_device_groups_cost_nothing():
    assert load("v100-2x8").concurrent_collective_time_s("all_reduce", GiB, [(0,), (1,)]) == 0.0


@pytest.mark.parametrize("name", ["v100-2x8", "a100-4x8", "h100-2048x8-leafspine"])
def test_plans_sharing_their_bottlenecks_equal_plans_made_alone(name):
    """Every kind on every axis of several meshes, planned in turn with one memo (the cluster's
    way: an all-reduce, all-gather and reduce-scatter share a ring, the hierarchical phases their
    intra- and inter-node groups), equals each planned with a memo of its own."""
    from stratagem.cluster.collectives import plan_collective
    from stratagem.space.placement import REPLICATE
    from stratagem.space.tensor_layout import TensorLayout
    cluster = load(name)
    shared: dict = {}
    meshes = [(2, 16), (4, 8), (8, 4), (32,), (2, 2, 8)] if cluster.num_devices >= 32 else [(2, 8), (16,), (4, 4)]
    for mesh in meshes:
        layout = TensorLayout(0, mesh, (REPLICATE,) * len(mesh))
        for axes in [(a,) for a in range(len(mesh))] + [tuple(range(len(mesh)))]:
            groups = tuple(tuple(g) for g in layout.axis_groups(axes))
            if len(groups[0]) < 2:
                continue
            for kind in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"):
                assert plan_collective(cluster, kind, groups, shared) == plan_collective(cluster, kind, groups)


def test_groups_as_tuples_of_lists_or_ranges_price_as_tuples_do():
    """A tuple of lists cannot key the cluster's caches and a tuple of ranges never equals a tuple of
    tuples: both are sorted and checked afresh, and price as the tuple of tuples does, before
    and after it is cached."""
    cluster = load("v100-2x8")
    plain = ((0, 1, 2, 3), (4, 5, 6, 7))
    for groups in ([[3, 2, 1, 0], [4, 5, 6, 7]], ([3, 2, 1, 0], [7, 6, 5, 4]), (range(4), range(4, 8)), plain, plain):
        assert cluster.concurrent_collective_time_s("all_reduce", 1e8, groups) == \
            load("v100-2x8").concurrent_collective_time_s("all_reduce", 1e8, plain)
    with pytest.raises(Exception, match="disjoint"):
        cluster.concurrent_collective_time_s("all_reduce", 1e8, ([0, 1], [1, 2]))
