"""The flows of many groups at once, as arrays, worked out once per shape of group.

Nodes are identical, so who sends to whom in a collective algorithm (cluster.patterns) depends only
on where a group's members sit on their nodes and in which order its nodes come: a group shifted by
whole nodes (g + s * devices_per_node) has the same flows, shifted by the same amount. `Shapes`
keys each group by its members relative to the first device of its first node; an algorithm's
flows are built once per key and shifted, so the thousands of per-node groups of a hierarchical
all-reduce on 16,384 GPUs cost one group's work. Flows keep the groups' order, and each group's
own order, so the loads summed from them (cluster.usage) are the same as from a loop over groups.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stratagem.cluster.patterns import Flow


@dataclass(frozen=True)
class FlowArrays:
    src: np.ndarray
    dst: np.ndarray
    weights: np.ndarray

    def __len__(self) -> int:
        return len(self.src)


class Shapes:
    """Groups (sorted device tuples) as (shape, shift) pairs."""

    def __init__(self, groups: Sequence[tuple[int, ...]], devices_per_node: int):
        self.groups = groups
        index: dict[tuple[int, ...], int] = {}
        self.keys: list[int] = []
        shifts = []
        for group in groups:
            shift = (min(group) // devices_per_node) * devices_per_node
            shape = tuple(d - shift for d in group)
            self.keys.append(index.setdefault(shape, len(index)))
            shifts.append(shift)
        self.shapes = list(index)
        self.shifts = np.array(shifts, dtype=np.int64)

    def each(self, build: Callable[[tuple[int, ...]], Any]) -> list[Any]:
        """`build` on one group of each shape (the shape itself: its devices from node 0 on)."""
        return [build(shape) for shape in self.shapes]

    def flows(self, per_shape: Sequence[Sequence[Flow]]) -> FlowArrays:
        """Every group's flows, shifted from its shape's, in group order."""
        arrays = [_arrays(flows) for flows in per_shape]
        if len(arrays) == 1:
            src, dst, weights = arrays[0]
            return FlowArrays(np.add.outer(self.shifts, src).ravel(), np.add.outer(self.shifts, dst).ravel(),
                              np.tile(weights, len(self.shifts)))
        parts = [(arrays[k][0] + s, arrays[k][1] + s, arrays[k][2]) for k, s in zip(self.keys, self.shifts)]
        return FlowArrays(*(np.concatenate([part[i] for part in parts]) for i in range(3)))


def _arrays(flows: Sequence[Flow]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not flows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    table = np.fromiter((x for flow in flows for x in flow), dtype=float, count=3 * len(flows)).reshape(-1, 3)
    return table[:, 0].astype(np.int64), table[:, 1].astype(np.int64), table[:, 2].copy()
