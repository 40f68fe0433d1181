"""Re-scheduling a DTensor from the layout it has to the layout an op reads it in (differentiable).

    same mesh              DTensor.redistribute
    different meshes over  both onto their common refinement (space.tensor_layout.refine): the local shard is
    the same devices       reinterpreted with from_local (no data moves), redistributed there, then
                           reinterpreted on the target mesh
    no refinement          (e.g. 2x3 and 3x2) the last resort: replicate on the source mesh, take the
                           whole tensor as replicated on the target mesh, redistribute from there

Gradients follow the same path back: to_local / from_local keep their default gradient placements
(a partial value's gradient is replicated), and redistribute's backward is DTensor's own.
"""

from __future__ import annotations

from torch.distributed.tensor import DTensor

from stratagem.space.tensor_layout import TensorLayout, refine
from stratagem.runtime.meshes import MeshBook, torch_placements
from stratagem.space import REPLICATE


def move(x: DTensor, src: TensorLayout, dst: TensorLayout, meshes: MeshBook) -> DTensor:
    if src.mesh_shape == dst.mesh_shape:
        return _redistribute(x, dst, meshes)
    pair = refine(src, dst)
    if pair is None:
        replicated = _redistribute(x, _replicated(src), meshes)
        return _redistribute(reinterpret(replicated, _replicated(dst), meshes), dst, meshes)
    fine_src, fine_dst = pair
    fine = _redistribute(reinterpret(x, fine_src, meshes), fine_dst, meshes)
    return reinterpret(fine, dst, meshes)


def reinterpret(x: DTensor, lay: TensorLayout, meshes: MeshBook) -> DTensor:
    """The same local shard seen on another mesh over the same devices."""
    return DTensor.from_local(x.to_local(), meshes[lay.mesh_shape], torch_placements(lay.placements),
                              shape=x.shape, stride=x.stride())


def _redistribute(x: DTensor, dst: TensorLayout, meshes: MeshBook) -> DTensor:
    placements = torch_placements(dst.placements)
    if tuple(x.placements) == placements:
        return x
    return x.redistribute(meshes[dst.mesh_shape], placements)


def _replicated(lay: TensorLayout) -> TensorLayout:
    return TensorLayout(lay.first_device, lay.mesh_shape, (REPLICATE,) * len(lay.mesh_shape))
