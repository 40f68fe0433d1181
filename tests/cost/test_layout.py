"""Tensor layouts: device boxes tile the tensor, axis groups, common mesh refinement."""

from __future__ import annotations

import math
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from stratagem.space.tensor_layout import TensorLayout, refine
from stratagem.space import REPLICATE, Partial, Shard

MESHES = [(8,), (2, 4), (4, 2), (2, 2, 2)]


@st.composite
def layouts(draw, rank=2):
    mesh = draw(st.sampled_from(MESHES))
    options = [REPLICATE, Partial("sum")] + [Shard(d) for d in range(rank)]
    return TensorLayout(0, mesh, tuple(draw(st.sampled_from(options)) for _ in mesh))


@settings(max_examples=60, deadline=None)
@given(layouts(), st.tuples(st.integers(1, 40), st.integers(1, 40)))
def test_boxes_of_distinct_pieces_tile_the_tensor(lay, shape):
    pieces = {}
    for d in lay.devices:
        key = tuple(c for c, p in zip(lay.coordinates(d), lay.placements) if isinstance(p, Shard))
        pieces.setdefault(key, lay.device_box(d, shape))
    assert sum(math.prod(hi - lo for lo, hi in box) for box in pieces.values()) == math.prod(shape)
    for d in lay.devices:
        assert all(hi - lo <= local for (lo, hi), local in zip(lay.device_box(d, shape), lay.local_shape(shape)))


def test_outer_axis_splits_first():
    lay = TensorLayout(0, (2, 4), (Shard(0), Shard(0)))
    assert [lay.device_box(d, (8,))[0] for d in range(8)] == [(i, i + 1) for i in range(8)]


def test_axis_groups():
    lay = TensorLayout(8, (2, 4), (REPLICATE, REPLICATE))
    assert lay.axis_groups((0,)) == ((8, 12), (9, 13), (10, 14), (11, 15))
    assert lay.axis_groups((1,)) == ((8, 9, 10, 11), (12, 13, 14, 15))
    assert lay.axis_groups((0, 1)) == (tuple(range(8, 16)),)


def test_refine_to_a_common_mesh():
    a = TensorLayout(0, (4, 2), (Shard(0), REPLICATE))
    b = TensorLayout(0, (2, 4), (REPLICATE, Shard(1)))
    ra, rb = refine(a, b)
    assert ra.mesh_shape == rb.mesh_shape == (2, 2, 2)
    assert ra.placements == (Shard(0), Shard(0), REPLICATE)
    assert rb.placements == (REPLICATE, Shard(1), Shard(1))
    for lay, fine in ((a, ra), (b, rb)):          # same regions on every device
        assert all(lay.device_box(d, (8, 8)) == fine.device_box(d, (8, 8)) for d in range(8))


def test_no_common_refinement_or_other_devices():
    assert refine(TensorLayout(0, (2, 3), (REPLICATE,) * 2), TensorLayout(0, (3, 2), (REPLICATE,) * 2)) is None
    assert refine(TensorLayout(0, (4,), (REPLICATE,)), TensorLayout(4, (4,), (REPLICATE,))) is None


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.integers(0, 7), st.data())
def test_axis_groups_match_the_coordinates_definition(mesh, first, data):
    """Groups of devices equal off `axes`, in device order, ordered by first device."""
    axes = tuple(data.draw(st.lists(st.integers(0, len(mesh) - 1), unique=True, max_size=len(mesh))))
    lay = TensorLayout(first, tuple(mesh), (REPLICATE,) * len(mesh))
    expected: dict = {}
    for device in lay.devices:
        key = tuple(c for a, c in enumerate(lay.coordinates(device)) if a not in axes)
        expected.setdefault(key, []).append(device)
    assert lay.axis_groups(axes) == tuple(tuple(g) for g in expected.values())


def test_axis_groups_key_dicts_as_the_plain_tuple_does():
    """Groups hash once, as the tuple of the same devices: a price or link cached under one is
    found under the other, also after a pickle (plans travel between processes)."""
    lay = TensorLayout(0, (4, 4), (REPLICATE, REPLICATE))
    groups = lay.axis_groups((1,))
    plain = tuple(tuple(range(r, r + 4)) for r in range(0, 16, 4))
    assert groups == plain and hash(groups) == hash(plain) and hash(groups) == hash(groups)
    assert {plain: "priced"}[groups] == "priced" and {groups: "priced"}[plain] == "priced"
    again = pickle.loads(pickle.dumps(groups))
    assert again == plain and hash(again) == hash(plain)
    assert all(type(d) is int for group in groups for d in group)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.lists(st.integers(1, 4), min_size=1, max_size=3),
       st.integers(0, 3), st.integers(0, 3), st.data())
def test_axis_groups_of_any_two_layouts_are_equal_as_their_devices_are(mesh_a, mesh_b, first_a, first_b, data):
    """Groups made by two layouts compare as their plain tuples do, whether they share what made
    them (then equal without a look at their devices) or not (equal devices from other meshes)."""
    lay_a = TensorLayout(first_a, tuple(mesh_a), (REPLICATE,) * len(mesh_a))
    lay_b = TensorLayout(first_b, tuple(mesh_b), (REPLICATE,) * len(mesh_b))
    axes_a = tuple(data.draw(st.lists(st.integers(0, len(mesh_a) - 1), unique=True, max_size=len(mesh_a))))
    axes_b = tuple(data.draw(st.lists(st.integers(0, len(mesh_b) - 1), unique=True, max_size=len(mesh_b))))
    a, b = lay_a.axis_groups(axes_a), lay_b.axis_groups(axes_b)
    plain_a, plain_b = tuple(a), tuple(b)
    assert (a == b) == (plain_a == plain_b) and (a != b) == (plain_a != plain_b)
    assert a == plain_a and not (a != plain_a) and (a == plain_b) == (plain_a == plain_b)
    if a == b:
        assert hash(a) == hash(b) == hash(plain_a)
    twin = TensorLayout(first_a, tuple(mesh_a), (REPLICATE,) * len(mesh_a)).axis_groups(tuple(reversed(axes_a)))
    assert twin is not a and twin == a and {a: "priced"}[twin] == "priced"
    assert a != "not groups" and not (a == 3)


def test_axis_groups_of_other_meshes_with_the_same_devices_are_equal():
    """(4, 2) on axes (0, 1) and (8,) on axis 0 group the same devices: equal, though made apart."""
    wide = TensorLayout(0, (4, 2), (REPLICATE, REPLICATE)).axis_groups((0, 1))
    flat = TensorLayout(0, (8,), (REPLICATE,)).axis_groups((0,))
    other = TensorLayout(8, (8,), (REPLICATE,)).axis_groups((0,))
    assert wide == flat and hash(wide) == hash(flat) and {wide: 1}[flat] == 1
    assert flat != other and not (flat == other)


def test_groups_of_meshes_that_merge_alike_share_their_origin():
    """(2, 4, 16) grouped on its last axis is (8, 16) grouped on its last, also with axes of size 1."""
    fine = TensorLayout(0, (2, 4, 16), (REPLICATE,) * 3).axis_groups((2,))
    coarse = TensorLayout(0, (8, 16), (REPLICATE,) * 2).axis_groups((1,))
    padded = TensorLayout(0, (8, 1, 16), (REPLICATE,) * 3).axis_groups((2,))
    assert fine._origin == coarse._origin == padded._origin and fine == coarse == padded
    across = TensorLayout(0, (2, 4, 16), (REPLICATE,) * 3).axis_groups((0, 2))
    assert across._origin != coarse._origin and across != coarse
