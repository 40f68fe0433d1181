"""Re-scheduling between any two layouts, cached: which method applies, then its plan.

    same layout                              -> nothing to do
    same device block, regular placements    -> refine both meshes to a common one (layout.refine),
                                                then the collective state machine (redistribute)
    otherwise (other devices, no common      -> point-to-point transfers of region intersections
    refinement, irregular placements)           (p2p)

Plans are cached per (shape, itemsize, source layout, target layout), and the collective state
machine's shortest paths per (the tensor's bytes, its rank, refined source layout, whether the
target is partial): one Dijkstra run serves every target from a source, and every tensor of the
same size and rank (its steps' bytes are the whole tensor's over the shard count; the shape
enters no other way).
"""

from __future__ import annotations

import math

from stratagem.cluster import Cluster
from stratagem.space.tensor_layout import TensorLayout, refine
from stratagem.cost.p2p import plan_p2p
from stratagem.cost.redistribute import Paths, Price, Redistribution, mesh_axis_groups, shortest_paths
from stratagem.space import Partial

Key = tuple[tuple[int, ...], int, TensorLayout, TensorLayout]


class Rescheduler:
    def __init__(self, cluster: Cluster, price: Price):
        self.cluster = cluster
        self.price = price
        self._plans: dict[Key, Redistribution] = {}
        self._paths: dict[tuple, Paths] = {}
        self._moves: dict[tuple, tuple] = {}     # redistribute.moves per state and mesh
        self._groups: dict[tuple, tuple] = {}    # each axis's device groups per (first device, mesh)
        self._graphs: dict[tuple, object] = {}   # cost.stategraph's graph per mesh, rank and rules

    def plan(self, shape: tuple[int, ...], itemsize: int, src: TensorLayout, dst: TensorLayout
             ) -> Redistribution:
        key = (shape, itemsize, src, dst)
        found = self._plans.get(key)
        if found is None:
            found = self._plans[key] = self._plan(shape, itemsize, src, dst)
        return found

    def _plan(self, shape: tuple[int, ...], itemsize: int, src: TensorLayout, dst: TensorLayout
              ) -> Redistribution:
        if src == dst:
            local = float(src.local_num_elements(shape) * itemsize)
            return Redistribution((), (src.placements,), 0.0, local)
        common = refine(src, dst) if src.is_regular and dst.is_regular else None
        if common is not None:
            source, target = common
            partial = any(isinstance(p, Partial) for p in target.placements)
            key = (math.prod(shape) * itemsize, len(shape), source, partial)
            paths = self._paths.get(key)
            if paths is None:
                paths = self._paths[key] = shortest_paths(source, shape, itemsize, self.price, partial,
                                                          self.cluster.spec.native_all_to_all, self._moves,
                                                          self._mesh_groups(source), self._graphs)
            return paths.to(target.placements)
        return plan_p2p(src, dst, shape, itemsize, self.cluster)

    def _mesh_groups(self, layout: TensorLayout) -> tuple:
        """redistribute.mesh_axis_groups, once per block and mesh: the refined layouts of every
        pair of placements on one mesh share them (on 16,384 devices each axis's groups hold
        every device)."""
        key = (layout.first_device, layout.mesh_shape)
        found = self._groups.get(key)
        if found is None:
            found = self._groups[key] = mesh_axis_groups(layout)
        return found
