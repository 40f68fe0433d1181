"""Cluster files without a `switches` section price exactly as before switch levels existed: the
collective estimates, point-to-point transfer times and routes recorded by the code before
(data/prices_before_switches.json: 210 collectives on eight presets, with concurrent groups) are
reproduced bit for bit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stratagem.cluster import load

RECORDED = json.loads((Path(__file__).parent / "data" / "prices_before_switches.json").read_text())["clusters"]


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_collectives_priced_as_before(name):
    cluster = load(name)
    for kind, groups, num_bytes, time_s, algorithm, protocol in RECORDED[name]["collectives"]:
        estimate = cluster.collective_estimate(kind, num_bytes, groups)
        assert (estimate.time_s, estimate.algorithm, estimate.protocol) == (time_s, algorithm, protocol), \
            (kind, groups, num_bytes)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_transfers_and_routes_as_before(name):
    cluster = load(name)
    for transfers, time_s in RECORDED[name]["transfers"]:
        assert cluster.transfers_time_s([tuple(t) for t in transfers]) == time_s
    for src, dst, links, latency_s, weight_s in RECORDED[name]["routes"]:
        assert list(cluster.route_ids(src, dst)) == links
        assert cluster.route_latency_s(src, dst) == latency_s
        assert cluster.route_weight_s(src, dst) == weight_s
