"""Re-scheduling: single steps against closed forms, optimality, refinement, point-to-point."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratagem.cost import CostModel
from stratagem.space.tensor_layout import TensorLayout
from stratagem.cost.reschedule import Rescheduler
from stratagem.space import REPLICATE, Configuration, Partial, Shard
from tests.cluster.helpers import switch_cluster
from tests.cost.graphs import conv

BW, HOP = 1e11, 1e-6
CLUSTER = switch_cluster(8, BW, HOP)
SHAPE, ITEM = (64, 128), 4
FULL = 64 * 128 * 4
S0, S1, R, P = Shard(0), Shard(1), REPLICATE, Partial("sum")


def plan(src, dst, mesh=(8,), dst_mesh=None, first=0, dst_first=0):
    rescheduler = Rescheduler(CLUSTER, CLUSTER.concurrent_collective_time_s)
    return rescheduler.plan(SHAPE, ITEM, TensorLayout(first, mesh, src),
                            TensorLayout(dst_first, dst_mesh or mesh, dst))


@pytest.mark.parametrize("src, dst, kind, num_bytes", [
    ((S0,), (R,), "all_gather", FULL), ((P,), (R,), "all_reduce", FULL),
    ((P,), (S1,), "reduce_scatter", FULL), ((S0,), (S1,), "all_to_all", FULL / 8)])
def test_one_collective_with_the_full_logical_buffer(src, dst, kind, num_bytes):
    found = plan(src, dst)
    assert found.kinds == (kind,)
    assert found.steps[0].num_bytes == num_bytes
    assert found.time_s == pytest.approx(CLUSTER.collective_time_s(kind, num_bytes, range(8)))


def test_scratch_counts_only_blocks_between_the_two_ends():
    """The source block is the producer's buffer and the destination the consumer's copy (the
    simulator holds both); scratch is what exists only mid-path."""
    assert plan((S0,), (R,)).scratch_bytes == 0.0                  # one gather: no intermediate
    two = plan((S0, S1), (R, R), mesh=(2, 4))
    assert len(two.states) == 3 and two.scratch_bytes in (FULL / 2, FULL / 4)


def test_slicing_is_free():
    assert plan((R,), (S1,)).steps == () and plan((R,), (S1,)).time_s == 0.0


def test_two_axes_gather_both_and_run_groups_concurrently():
    found = plan((S0, S1), (R, R), mesh=(2, 4))
    assert found.kinds == ("all_gather", "all_gather")
    assert {len(s.groups) for s in found.steps} == {2, 4}           # 2 groups of 4, 4 groups of 2
    assert found.states[-1] == (R, R)


def test_refinement_turns_a_mesh_change_into_one_all_to_all():
    found = plan((S0,), (S0, S1), mesh=(8,), dst_mesh=(2, 4))
    assert found.kinds == ("all_to_all",)
    assert len(found.steps[0].groups) == 2


def replicate_then_slice_s(src: tuple, mesh: tuple[int, ...]) -> float:
    """Cost of a path that is always available: reduce every P, gather every S, then slice."""
    state, total = list(src), 0.0
    lay = TensorLayout(0, mesh, tuple(src))
    for x in reversed(range(len(mesh))):
        local = FULL / math.prod(s for s, p in zip(mesh, state) if isinstance(p, Shard))
        groups = lay.axis_groups((x,))
        if isinstance(state[x], Partial):
            total += CLUSTER.concurrent_collective_time_s("all_reduce", local, groups)
        elif isinstance(state[x], Shard):
            total += CLUSTER.concurrent_collective_time_s("all_gather", local * mesh[x], groups)
        state[x] = R
    return total


@st.composite
def placements(draw, mesh, partial=True):
    options = [R, S0, S1] + ([P] if partial else [])
    return tuple(draw(st.sampled_from(options)) for _ in mesh)


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from([(8,), (2, 4), (4, 2), (2, 2, 2)]))
def test_paths_are_valid_and_no_worse_than_replicate_then_slice(data, mesh):
    src, dst = data.draw(placements(mesh)), data.draw(placements(mesh, partial=False))
    found = plan(src, dst, mesh=mesh)
    assert found.states[0] == src and found.states[-1] == dst
    assert all(sum(a != b for a, b in zip(u, v)) == 1 for u, v in zip(found.states, found.states[1:]))
    assert found.time_s <= replicate_then_slice_s(src, mesh) * (1 + 1e-9)


def test_other_devices_use_point_to_point():
    found = plan((S0,), (S0,), mesh=(4,), first=0, dst_first=4)
    step, = found.steps
    assert step.kind == "p2p" and step.groups == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert step.pair_bytes == (FULL / 4,) * 4
    assert found.time_s == pytest.approx(2 * HOP + FULL / 4 / BW)   # disjoint links, all at once


def test_partial_sources_send_every_contribution():
    found = plan((P,), (R,), mesh=(2,), first=0, dst_first=2, dst_mesh=(2,))
    assert sorted(found.steps[0].groups) == [(0, 2), (0, 3), (1, 2), (1, 3)]


def test_convolution_halo_moves_only_the_halo(checked):
    graph = checked(conv(batch=8, channels=16, length=64, kernel=3))
    model = CostModel(graph, "v100-2x8", num_devices=2)
    split = Configuration.of(l=2)
    edge = model.edge_cost("y", "c1", split, "c2", split)
    # y has 62 columns: c1 leaves [0, 31) and [31, 62); c2's devices read [0, 32) and [30, 62),
    # so one column crosses the boundary each way (kernel - 1 = 2 in all)
    step, = edge.forward_steps
    assert step.kind == "p2p" and step.groups == ((0, 1), (1, 0))
    assert step.pair_bytes == (8 * 16 * 1 * 4,) * 2
    back, = edge.backward_steps          # the halo's gradient contributions go back to be summed
    assert back.kind == "p2p" and back.groups == ((0, 1), (1, 0)) and back.pair_bytes == step.pair_bytes


def test_without_a_native_all_to_all_a_shard_move_gathers_the_whole_axis():
    """gloo: DTensor runs S(a) -> S(b) as all-gather + chunk, so the step moves and holds the whole
    tensor along the axis, where an all-to-all moves one block's worth."""
    from dataclasses import replace
    from stratagem.cluster import Cluster
    gloo = Cluster(replace(CLUSTER.spec, native_all_to_all=False))
    found = Rescheduler(gloo, gloo.concurrent_collective_time_s).plan(
        SHAPE, ITEM, TensorLayout(0, (8,), (S0,)), TensorLayout(0, (8,), (S1,)))
    assert found.kinds == ("all_gather",) and found.steps[0].num_bytes == FULL
    assert found.scratch_bytes == FULL and found.states[-1] == (S1,)
    assert found.time_s == pytest.approx(gloo.collective_time_s("all_gather", FULL, range(8)))
    assert plan((S0,), (S1,)).scratch_bytes == 0.0                 # native: no gathered block
    gathered = Rescheduler(gloo, gloo.concurrent_collective_time_s).plan(
        SHAPE, ITEM, TensorLayout(0, (8,), (S0,)), TensorLayout(0, (8,), (R,)))
    assert gathered.scratch_bytes == 0.0                           # S -> R: the gather is the result


def test_the_cpu_preset_says_gloo_has_no_all_to_all():
    from stratagem.cluster import load
    assert not load("cpu-1x4").spec.native_all_to_all and load("v100-2x8").spec.native_all_to_all


@settings(max_examples=40, deadline=None)
@given(st.data(), st.sampled_from([(8,), (2, 4), (2, 2, 2)]))
def test_moves_shared_across_sizes_and_targets_change_no_plan(data, mesh):
    """One re-scheduler plans many tensors and targets, sharing each state's moves between them
    (they do not depend on the size): its plans equal a fresh re-scheduler's per request."""
    shared = Rescheduler(CLUSTER, CLUSTER.concurrent_collective_time_s)
    for _ in range(4):
        src, dst = data.draw(placements(mesh)), data.draw(placements(mesh))
        shape = data.draw(st.sampled_from([SHAPE, (32, 128), (64, 64, 2)]))
        if len(shape) == 3:
            src, dst = tuple(Shard(2) if p == S1 else p for p in src), dst
        fresh = Rescheduler(CLUSTER, CLUSTER.concurrent_collective_time_s)
        args = (shape, ITEM, TensorLayout(0, mesh, src), TensorLayout(0, mesh, dst))
        assert shared.plan(*args) == fresh.plan(*args)
