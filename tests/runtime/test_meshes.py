"""MeshBook: every mesh a plan needs, created once, in an order all ranks share; a book shared by the
plans of one job creates each shape's process groups once (on a fake world of 8 ranks)."""

from __future__ import annotations

import pytest
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore

from stratagem.runtime.errors import ExecutionError
from stratagem.runtime.execute import _mesh_book
from stratagem.runtime.meshes import MeshBook


@pytest.fixture(scope="module")
def fake_world():
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    yield
    dist.destroy_process_group()


def _num_groups() -> int:
    return len(dist.distributed_c10d._world.pg_names)


def test_meshes_are_created_in_sorted_order_whatever_order_they_are_asked_in(fake_world):
    book = MeshBook([(2, 4), (8,), (4, 2), (2, 2, 2)], 8, "cpu")
    assert book.shapes == ((8,), (2, 4), (4, 2), (2, 2, 2))
    assert book[(2, 4)].mesh.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_a_shared_book_creates_each_shape_once(fake_world):
    book = MeshBook([(8,), (2, 4)], 8, "cpu")
    mesh = book[(2, 4)]
    before = _num_groups()
    book.add([(2, 4), (8,)])
    assert _num_groups() == before and book[(2, 4)] is mesh
    book.add([(4, 2), (2, 4)])
    assert _num_groups() > before and book.shapes == ((8,), (2, 4), (4, 2))


def test_a_plan_given_a_book_adds_its_shapes_to_it(fake_world):
    book = MeshBook([(8,)], 8, "cpu")
    assert _mesh_book(book, [(2, 4)], 8, "cpu") is book and (2, 4) in book.shapes
    with pytest.raises(ExecutionError, match="another world"):
        _mesh_book(book, [(4,)], 4, "cpu")


def test_a_shape_that_does_not_cover_the_world_is_refused(fake_world):
    with pytest.raises(ExecutionError, match="does not cover the world"):
        MeshBook([(2, 2)], 8, "cpu")
    with pytest.raises(ExecutionError, match="not created at start-up"):
        MeshBook([(8,)], 8, "cpu")[(2, 4)]
