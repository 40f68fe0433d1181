"""Who sends to whom in each collective algorithm: flows (src, dst, weight) between devices.

A flow's weight is the fraction of the algorithm's per-rank volume that crosses that pair; the
links a flow's route uses carry its weight, and a group's bandwidth is the bottleneck
min_l bandwidth_l / load_l over its links (`cluster.collectives.bottleneck`).

Rings (`ring_channels`). NCCL runs several rings ("channels") at once over different links. Inside
one node, for groups of up to `MAX_SEARCH_DEVICES`, we search as NCCL does: repeatedly take the
Hamiltonian cycle whose bottleneck on the remaining link capacity is largest (`best_ring`: depth
first search with branch and bound), subtract its bandwidth from its links, and stop when the next
ring would be slower than `MIN_CHANNEL_FRACTION` of the first (NCCL looks for channels of one
speed; the fraction keeps a ring through PCIe from joining NVLink rings). Each ring's share of the
data is its bandwidth over the total. On DGX-1V's hybrid cube-mesh this finds two rings over the
double links (40 GB/s each) and two over the single links (20 GB/s): 120 GB/s per GPU, all six
NVLinks busy; on a switch one ring already saturates the links.
Rings spanning nodes visit nodes in order; inside each node, members follow the node's best ring.

Trees (`tree_edges`): NCCL's double binary tree. Inside a node a chain; across nodes two binary
trees over the node heads, the second shifted by one so that a node interior in one tree is a leaf
in the other; each tree carries half of the data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Flow = tuple[int, int, float]
Route = Callable[[int, int], tuple[int, ...]]

MAX_SEARCH_DEVICES = 8
MIN_CHANNEL_FRACTION = 0.5
MAX_CHANNELS = 16


# ---- rings -----------------------------------------------------------------------------------------

def best_ring(group: Sequence[int], route: Route, residual: dict[int, float]
              ) -> tuple[tuple[int, ...], float]:
    """The directed Hamiltonian cycle over `group` with the largest bottleneck residual/load."""
    start, best = group[0], [0.0, tuple(group)]
    counts: dict[int, int] = {}

    def add(a: int, b: int, bottleneck: float) -> float:
        for link in route(a, b):
            counts[link] = counts.get(link, 0) + 1
            bottleneck = min(bottleneck, residual[link] / counts[link])
        return bottleneck

    def remove(a: int, b: int) -> None:
        for link in route(a, b):
            counts[link] -= 1

    def visit(path: list[int], remaining: list[int], bottleneck: float) -> None:
        if not remaining:
            closed = add(path[-1], start, bottleneck)
            remove(path[-1], start)
            if closed > best[0]:
                best[0], best[1] = closed, tuple(path)
            return
        for i, nxt in enumerate(remaining):
            narrowed = add(path[-1], nxt, bottleneck)
            if narrowed > best[0]:
                visit(path + [nxt], remaining[:i] + remaining[i + 1:], narrowed)
            remove(path[-1], nxt)

    visit([start], sorted(group[1:]), float("inf"))
    return best[1], best[0]


def ring_links(order: Sequence[int], route: Route) -> dict[int, int]:
    counts: dict[int, int] = {}
    for a, b in zip(order, (*order[1:], order[0])):
        for link in route(a, b):
            counts[link] = counts.get(link, 0) + 1
    return counts


def search_channels(group: Sequence[int], route: Route, bandwidth: Callable[[int], float]
                    ) -> tuple[tuple[tuple[int, ...], float], ...]:
    """Rings of comparable speed over one node's `group`, with each ring's share of the data."""
    residual: dict[int, float] = {}
    for a in group:
        for b in group:
            if a != b:
                residual.update((link, bandwidth(link)) for link in route(a, b))
    found: list[tuple[tuple[int, ...], float]] = []
    while len(found) < MAX_CHANNELS:
        order, speed = best_ring(group, route, residual)
        if speed <= 0 or (found and speed < MIN_CHANNEL_FRACTION * found[0][1]):
            break
        found.append((order, speed))
        for link, count in ring_links(order, route).items():
            residual[link] = max(0.0, residual[link] - speed * count)
    if not found:
        return ((tuple(group), 1.0),)
    total = sum(speed for _, speed in found)
    return tuple((order, speed / total) for order, speed in found)


def ring_flows(channels: Sequence[tuple[Sequence[int], float]]) -> tuple[Flow, ...]:
    return tuple((a, b, share) for order, share in channels
                 for a, b in zip(order, (*order[1:], order[0])))


def chain_flows(order: Sequence[int]) -> tuple[Flow, ...]:
    """A pipelined chain from order[0] (broadcast)."""
    return tuple((a, b, 1.0) for a, b in zip(order, order[1:]))


def pairwise_flows(group: Sequence[int]) -> tuple[Flow, ...]:
    """All-to-all: every rank sends 1/(p-1) of its volume to each other rank."""
    weight = 1.0 / (len(group) - 1)
    return tuple((a, b, weight) for a in group for b in group if a != b)


# ---- trees -----------------------------------------------------------------------------------------

def inorder_parents(count: int) -> list[int | None]:
    """Parents in the balanced in-order binary tree over 0..count-1 (root's parent None)."""
    parents: list[int | None] = [None] * count

    def build(lo: int, hi: int, parent: int | None) -> None:
        if lo >= hi:
            return
        mid = (lo + hi) // 2
        parents[mid] = parent
        build(lo, mid, mid)
        build(mid + 1, hi, mid)

    build(0, count, None)
    return parents


def inorder_depth(count: int) -> int:
    """Depth of `inorder_parents(count)`'s tree: halving at the middle, floor(log2(count))."""
    return max(count, 1).bit_length() - 1


def tree_edges(parts: Sequence[Sequence[int]]) -> tuple[tuple[Flow, ...], int]:
    """Up edges (child -> parent) of NCCL's double binary tree over per-node parts, and its depth.

    parts: the group's members on each node (nodes in order, members sorted). Weights are 1/2 per
    tree, so a chain link inside a node (in both trees) carries weight 1.
    """
    flows: list[Flow] = []
    for part in parts:
        flows.extend((part[i + 1], part[i], 1.0) for i in range(len(part) - 1))
    count = len(parts)
    first = inorder_parents(count)
    shifted = [None if first[(i + 1) % count] is None else (first[(i + 1) % count] - 1) % count
               for i in range(count)]
    for parents in (first, shifted):
        flows.extend((parts[i][0], parts[p][0], 0.5) for i, p in enumerate(parents) if p is not None)
    chain = max(len(part) for part in parts) - 1
    return tuple(flows), chain + inorder_depth(count)


def reverse(flows: Sequence[Flow]) -> tuple[Flow, ...]:
    return tuple((b, a, w) for a, b, w in flows)
