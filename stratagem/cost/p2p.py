"""Re-scheduling by point-to-point transfers of region intersections (FlexFlow §5.1).

Used when no collective path exists: the device blocks differ, the meshes have no common
refinement, or a placement is irregular (a halo). Pieces of the source (`pieces`): devices that
hold the same region of the same value (they differ only on R axes) form one piece with several
holders; devices that differ on a P axis (or on an irregular axis, whose overlapping regions are
partial gradient contributions) hold separate pieces that must all be summed.

    for each destination device e and the region B it needs (nothing on a P-axis coordinate > 0):
        for each piece (region A, holders H) with A ∩ B not empty:
            if e not in H: move |A ∩ B| bytes from the holder h in H nearest to e (of those as
                           near, the one that has sent least so far: a replicated tensor's copies
                           go out over several devices' links at once)
    time = all transfers at once, sharing the links they cross (`Cluster.transfers_time_s`)
"""

from __future__ import annotations

import math

from stratagem.cluster import Cluster
from stratagem.space.tensor_layout import Box, TensorLayout
from stratagem.cost.redistribute import Redistribution
from stratagem.cost.steps import CommStep
from stratagem.space import REPLICATE, Partial


def pieces(layout: TensorLayout, shape: tuple[int, ...]) -> list[tuple[Box, tuple[int, ...]]]:
    found: dict[tuple[int, ...], list[int]] = {}
    for device in layout.devices:
        coords = layout.coordinates(device)
        key = tuple(c for c, p in zip(coords, layout.placements) if p != REPLICATE)
        found.setdefault(key, []).append(device)
    return [(layout.device_box(holders[0], shape), tuple(holders)) for holders in found.values()]


def needs_value(layout: TensorLayout, device: int) -> bool:
    """On a P axis only coordinate 0 holds the value; the others hold zeros."""
    coords = layout.coordinates(device)
    return all(c == 0 for c, p in zip(coords, layout.placements) if isinstance(p, Partial))


def intersection_elements(a: Box, b: Box) -> int:
    return math.prod(max(0, min(x1, y1) - max(x0, y0)) for (x0, x1), (y0, y1) in zip(a, b))


def transfers(src: TensorLayout, dst: TensorLayout, shape: tuple[int, ...], itemsize: int,
              cluster: Cluster) -> dict[tuple[int, int], float]:
    moved: dict[tuple[int, int], float] = {}
    sent: dict[int, float] = {}
    source = pieces(src, shape)
    for e in dst.devices:
        if not needs_value(dst, e):
            continue
        need = dst.device_box(e, shape)
        for box, holders in source:
            elements = intersection_elements(box, need)
            if elements == 0 or e in holders:
                continue
            h = holders[0] if len(holders) == 1 else min(
                holders, key=lambda h: (cluster.route_weight_s(h, e), sent.get(h, 0.0), h))
            moved[(h, e)] = moved.get((h, e), 0.0) + elements * itemsize
            sent[h] = sent.get(h, 0.0) + elements * itemsize
    return moved


def plan_p2p(src: TensorLayout, dst: TensorLayout, shape: tuple[int, ...], itemsize: int,
             cluster: Cluster) -> Redistribution:
    moved = transfers(src, dst, shape, itemsize, cluster)
    peak = float(max(src.local_num_elements(shape), dst.local_num_elements(shape)) * itemsize)
    if not moved:
        return Redistribution((), (), 0.0, peak)
    pairs = tuple(sorted(moved))
    pair_bytes = tuple(moved[p] for p in pairs)
    time_s = cluster.transfers_time_s((s, d, b) for (s, d), b in zip(pairs, pair_bytes))
    step = CommStep("p2p", pairs, max(pair_bytes), time_s, pair_bytes)
    return Redistribution((step,), (), time_s, peak)
