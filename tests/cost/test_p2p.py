"""cost.p2p: the point-to-point transfers (vectorized) against the module's loops written out, on
random layouts of random tensors over device blocks, with replicated, sharded, partial and
irregular (halo) placements."""

from __future__ import annotations

import math
import random

from stratagem.cluster import load
from stratagem.cost.p2p import transfers
from stratagem.space import REPLICATE, Partial, Shard
from stratagem.space.tensor_layout import TensorLayout


def looped(src: TensorLayout, dst: TensorLayout, shape, itemsize: int, cluster) -> dict:
    """The module docstring's loops, one device and one piece at a time."""
    groups: dict[tuple, list[int]] = {}
    for device in src.devices:
        key = tuple(c for c, p in zip(src.coordinates(device), src.placements) if p != REPLICATE)
        groups.setdefault(key, []).append(device)
    source = [(src.device_box(h[0], shape), tuple(h)) for h in groups.values()]
    moved, sent = {}, {}
    for e in dst.devices:
        if any(c and isinstance(p, Partial) for c, p in zip(dst.coordinates(e), dst.placements)):
            continue
        need = dst.device_box(e, shape)
        for box, holders in source:
            elements = math.prod(max(0, min(a1, b1) - max(a0, b0)) for (a0, a1), (b0, b1) in zip(box, need))
            if elements == 0 or e in holders:
                continue
            h = holders[0] if len(holders) == 1 else min(
                holders, key=lambda h: (cluster.route_weight_s(h, e), sent.get(h, 0.0), h))
            moved[(h, e)] = moved.get((h, e), 0.0) + elements * itemsize
            sent[h] = sent.get(h, 0.0) + elements * itemsize
    return moved


def random_layout(rng: random.Random, shape) -> TensorLayout:
    mesh = rng.choice([(2,), (4,), (2, 2), (2, 4), (4, 2), (8,), (2, 2, 2)])
    first = rng.choice([0, 8]) if math.prod(mesh) <= 8 else 0
    placements = tuple(rng.choice([Shard(0), Shard(1), Shard(2), REPLICATE, Partial("sum"), None]) for _ in mesh)
    if None not in placements:
        return TensorLayout(first, mesh, placements)
    regular = TensorLayout(first, mesh, tuple(Shard(1) if p is None else p for p in placements))
    boxes = []
    for device in regular.devices:         # a halo of one row each side along dim 1
        box = list(regular.device_box(device, shape))
        box[1] = (max(0, box[1][0] - 1), min(shape[1], box[1][1] + 1))
        boxes.append(tuple(box))
    return TensorLayout(first, mesh, placements, tuple(boxes))


def test_transfers_are_the_loops():
    cluster, rng, nonempty = load("v100-2x8"), random.Random(0), 0
    for _ in range(400):
        shape = (rng.choice([4, 6, 8, 12]), rng.choice([4, 8, 9]), rng.choice([1, 8, 16]))
        src, dst = random_layout(rng, shape), random_layout(rng, shape)
        senders, receivers, num_bytes = transfers(src, dst, shape, 4, cluster)
        found = dict(zip(zip(senders.tolist(), receivers.tolist()), num_bytes.tolist()))
        assert found == looped(src, dst, shape, 4, cluster), (src, dst, shape)
        assert list(zip(senders.tolist(), receivers.tolist())) == sorted(found)
        nonempty += bool(found)
    assert nonempty > 300
