"""Device meshes and placements in torch terms.

Every configuration the runtime runs covers all devices (space.runnable), so a mesh is named by its
shape alone: the world's ranks in row-major order, reshaped. `MeshBook` creates every mesh a plan
needs (its ops' meshes, the data loader's 1-D mesh, and the common refinement of every pair of
meshes a tensor moves between) once, at start-up, in sorted order, so that all ranks create the
same process groups in the same order. A book can be shared by several plans run one after another
in the same world (`add`): a shape another plan already created is reused, not created again, so a
job of many plans opens each mesh's process groups (gloo: connections and threads) once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Partial as TorchPartial
from torch.distributed.tensor import Replicate as TorchReplicate
from torch.distributed.tensor import Shard as TorchShard

from stratagem.runtime.errors import ExecutionError
from stratagem.space import Partial, Placement, Replicate, Shard


def torch_placements(placements: Iterable[Placement]) -> tuple:
    return tuple(_one(p) for p in placements)


def _one(p: Placement):
    if isinstance(p, Shard):
        return TorchShard(p.dim)
    if isinstance(p, Replicate):
        return TorchReplicate()
    if isinstance(p, Partial):
        return TorchPartial(p.reduce_op)
    raise ExecutionError("placement has no DTensor equivalent", expected="S(d), R or P(op)", got=repr(p))


class MeshBook:
    """The DeviceMesh of every mesh shape over the world, created up front."""

    def __init__(self, shapes: Iterable[tuple[int, ...]], world_size: int, device_type: str):
        self.world_size, self.device_type = world_size, device_type
        self._meshes: dict[tuple[int, ...], DeviceMesh] = {}
        self.add(shapes)

    def add(self, shapes: Iterable[tuple[int, ...]]) -> None:
        """Create the meshes of `shapes` not created yet, in sorted order (a collective: every rank
        must add the same shapes at the same point)."""
        for shape in sorted({tuple(s) for s in shapes} - set(self._meshes), key=lambda s: (len(s), s)):
            self._create(shape)

    def _create(self, shape: tuple[int, ...]) -> DeviceMesh:
        if math.prod(shape) != self.world_size:
            raise ExecutionError(f"mesh {shape} does not cover the world",
                                expected=f"{self.world_size} devices", got=f"{math.prod(shape)}")
        ranks = torch.arange(self.world_size, device="cpu").reshape(shape)
        self._meshes[shape] = DeviceMesh(self.device_type, ranks)
        return self._meshes[shape]

    def __getitem__(self, shape: tuple[int, ...]) -> DeviceMesh:
        found = self._meshes.get(tuple(shape))
        if found is None:
            raise ExecutionError(f"mesh {shape} was not created at start-up",
                                hint="MeshBook must be given every shape before the first step, so "
                                     "all ranks create process groups in the same order")
        return found

    @property
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(self._meshes)
