"""Zoo inputs are drawn where their generator is, whatever torch's default device (a CUDA rank sets
it: runtime.worker), so every rank and the reference see the same batch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402

from stratagem.frontend import zoo  # noqa: E402
from stratagem.runtime.meshes import MeshBook  # noqa: E402


@pytest.fixture
def meta_default_device():
    torch.set_default_device("meta")            # stands for "cuda": a device a CPU generator cannot draw on
    yield
    torch.set_default_device(None)


def test_inputs_are_the_same_under_another_default_device(meta_default_device):
    drawn = zoo.variant("gpt-tiny").inputs(2, torch.device("cpu"), torch.Generator().manual_seed(3))
    torch.set_default_device(None)
    again = zoo.variant("gpt-tiny").inputs(2, torch.device("cpu"), torch.Generator().manual_seed(3))
    assert all(a.device.type == "cpu" and torch.equal(a, b) for a, b in zip(drawn, again))


def test_a_mesh_is_built_on_the_cpu_under_another_default_device(meta_default_device):
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert MeshBook([(1,)], 1, "cpu")[(1,)].mesh.device.type == "cpu"
    finally:
        dist.destroy_process_group()
