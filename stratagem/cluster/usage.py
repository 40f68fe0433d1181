"""What flows cost the links they cross: the one rule that prices moving bytes on a cluster.

Flows (src, dst, weight) run at the same time; each puts its weight on every link of its route
(cluster.routes, links in both directions separate, as FlexFlow §5.1 treats links as devices).

    load_l      = sum of the weights of the flows whose routes cross link l    (`loads`)
    bandwidth   = min over used links of bandwidth_l / load_l                  (`bottleneck_bandwidth`)
    serial time = max over used links of load_l / bandwidth_l                  (`busiest_time_s`)
    latency     = max over flows of the per-hop latencies summed along its route (`latency_s`)

A collective's flows weigh the share of its per-rank volume each carries (cluster.collectives:
t = ... + v(p) n / (f B) with B the bottleneck bandwidth, TensorOpt §3.2's contention on shared
links); point-to-point transfers weigh their bytes (Cluster.transfers_time_s: the busiest link's
bytes over its bandwidth, after the slowest route's latency). So a link that several groups, or a
leaf's oversubscribed uplinks, carry at once is priced once, here, for every caller.

Loads are summed in flow order: by a loop over cached routes for up to FEW_FLOWS flows, else with
numpy (bincount adds in the same order, so the sums are the same to the bit), in chunks of
CHUNK_FLOWS flows so that memory stays bounded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CHUNK_FLOWS = 1 << 18
FEW_FLOWS = 256          # up to this many flows, a loop over cached routes is faster than arrays


@dataclass(frozen=True)
class LinkUsage:
    latency_s: float            # the slowest route's latency
    links: np.ndarray           # ids of the links some flow crosses, ascending
    loads: np.ndarray           # per link: the weights of the flows crossing it, summed
    bandwidths: np.ndarray      # per link: bytes/s in its direction

    def bottleneck_bandwidth(self) -> float:
        """min_l bandwidth_l / load_l: what one unit of weight gets on the busiest link."""
        return float(np.min(self.bandwidths / self.loads)) if len(self.links) else float("inf")

    def busiest_time_s(self) -> float:
        """max_l load_l / bandwidth_l: the busiest link's load over its bandwidth."""
        return float(np.max(self.loads / self.bandwidths)) if len(self.links) else 0.0


def link_usage(routes, src: np.ndarray, dst: np.ndarray, weights: np.ndarray) -> LinkUsage:
    """Flows src[i] -> dst[i] of weights[i] (> 0), all at once, on `routes` (a RouteTable)."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    weights = np.asarray(weights, dtype=float)
    if len(src) <= FEW_FLOWS:
        return _few(routes, src, dst, weights)
    parts, latency = [], 0.0
    for start in range(0, len(src), CHUNK_FLOWS):
        part = slice(start, start + CHUNK_FLOWS)
        rows = routes.rows(src[part], dst[part])
        parts.append(_loads(rows, weights[part]))
        if len(rows):
            latency = max(latency, float(np.max(routes.route_latency_s(rows))))
    return _usage(routes, parts, latency)


def usage_of_rows(routes, parts: list[tuple[np.ndarray, np.ndarray]], latency_s: float) -> LinkUsage:
    """Loads of (parts of) routes given as (rows of link ids, PAD -1; weights > 0) pairs, with the
    slowest whole route's latency known: for flows counted by class rather than one by one
    (cluster.alltoall)."""
    return _usage(routes, [_loads(rows, np.asarray(weights, dtype=float)) for rows, weights in parts], latency_s)


def _few(routes, src: np.ndarray, dst: np.ndarray, weights: np.ndarray) -> LinkUsage:
    """`link_usage` by a loop over each flow's (cached) route: the same sums in the same order."""
    loads: dict[int, float] = {}
    latency = 0.0
    for a, b, weight in zip(src.tolist(), dst.tolist(), weights.tolist()):
        path, path_latency_s = routes.cached(a, b)
        latency = max(latency, path_latency_s)
        for link in path:
            loads[link] = loads.get(link, 0.0) + weight
    links = np.array(sorted(loads), dtype=np.int64)
    return LinkUsage(latency, links, np.array([loads[link] for link in links.tolist()]), routes.bandwidth(links))


def _loads(rows: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(links crossed, ascending; the weights on each, summed in flow order)."""
    flat = rows.ravel()
    used = flat >= 0
    links, index = np.unique(flat[used], return_inverse=True)
    return links, np.bincount(index, weights=np.repeat(weights, rows.shape[1])[used], minlength=len(links))


def _usage(routes, parts: list[tuple[np.ndarray, np.ndarray]], latency_s: float) -> LinkUsage:
    if len(parts) <= 1:
        links, loads = parts[0] if parts else (np.zeros(0, dtype=np.int64), np.zeros(0))
    else:
        links, index = np.unique(np.concatenate([p[0] for p in parts]), return_inverse=True)
        loads = np.bincount(index, weights=np.concatenate([p[1] for p in parts]), minlength=len(links))
    return LinkUsage(latency_s, links, loads, routes.bandwidth(links))
