"""Re-scheduling by point-to-point transfers of region intersections (FlexFlow §5.1).

Used when no collective path exists: the device blocks differ, the meshes have no common
refinement, or a placement is irregular (a halo). Pieces of the source (`TensorLayout.pieces`): devices that
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

import numpy as np

from stratagem.cluster import Cluster
from stratagem.space.tensor_layout import TensorLayout
from stratagem.cost.redistribute import Redistribution
from stratagem.cost.steps import CommStep
from stratagem.space import Partial


def valued_devices(layout: TensorLayout) -> list[int]:
    """The devices that need the value: on a P axis only coordinate 0 holds it; the others hold
    zeros."""
    coords = layout.all_coordinates()
    partial = [a for a, p in enumerate(layout.placements) if isinstance(p, Partial)]
    keep = ~np.any(coords[:, partial] != 0, axis=1) if partial else np.ones(len(coords), dtype=bool)
    return [layout.first_device + int(d) for d in np.flatnonzero(keep)]


Moves = tuple[np.ndarray, np.ndarray, np.ndarray]     # senders, receivers, bytes: one entry per pair


def transfers(src: TensorLayout, dst: TensorLayout, shape: tuple[int, ...], itemsize: int,
              cluster: Cluster) -> Moves:
    """The module's loops: the intersections of every destination's box with every piece at once
    (numpy), then, in the same order (destination, then piece), each non-empty one. Returns the
    bytes each (sender, receiver) pair moves, sorted by sender, then receiver."""
    have, holding = src.pieces(shape)
    wanting = valued_devices(dst)
    need = dst.device_boxes(shape)[[e - dst.first_device for e in wanting]]
    overlap = (np.minimum(need[:, None, :, 1], have[None, :, :, 1])
               - np.maximum(need[:, None, :, 0], have[None, :, :, 0]))
    counts = np.prod(np.clip(overlap, 0, None), axis=2)
    rows, cols = np.nonzero(counts)
    if all(len(h) == 1 for h in holding):       # no R axis: each piece has one holder, each pair once
        senders = np.array([h[0] for h in holding], dtype=np.int64)[cols]
        receivers = np.array(wanting, dtype=np.int64)[rows]
        apart = senders != receivers
        senders, receivers = senders[apart], receivers[apart]
        order = np.lexsort((receivers, senders))
        return senders[order], receivers[order], (counts[rows, cols][apart] * itemsize).astype(float)[order]
    moved: dict[tuple[int, int], float] = {}
    sent: dict[int, float] = {}
    for i, j in zip(rows.tolist(), cols.tolist()):
        e, holders, elements = wanting[i], holding[j], int(counts[i, j])
        if e in holders:
            continue
        h = holders[0] if len(holders) == 1 else min(
            holders, key=lambda h: (cluster.route_weight_s(h, e), sent.get(h, 0.0), h))
        moved[(h, e)] = moved.get((h, e), 0.0) + elements * itemsize
        sent[h] = sent.get(h, 0.0) + elements * itemsize
    pairs = sorted(moved)
    return (np.array([a for a, _ in pairs], dtype=np.int64), np.array([b for _, b in pairs], dtype=np.int64),
            np.array([moved[p] for p in pairs], dtype=float))


def plan_p2p(src: TensorLayout, dst: TensorLayout, shape: tuple[int, ...], itemsize: int,
             cluster: Cluster) -> Redistribution:
    senders, receivers, num_bytes = transfers(src, dst, shape, itemsize, cluster)
    peak = float(max(src.local_num_elements(shape), dst.local_num_elements(shape)) * itemsize)
    if not len(senders):
        return Redistribution((), (), 0.0, peak)
    time_s = cluster.arrays_transfer_time_s(senders, receivers, num_bytes)
    pair_bytes = tuple(num_bytes.tolist())
    step = CommStep("p2p", tuple(zip(senders.tolist(), receivers.tolist())), max(pair_bytes), time_s, pair_bytes)
    return Redistribution((step,), (), time_s, peak)
