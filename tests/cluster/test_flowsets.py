"""Groups shifted by whole nodes share their flows (cluster.flowsets): flows built once per shape
and shifted are the flows built group by group."""

from __future__ import annotations

import numpy as np
import pytest

from stratagem.cluster import load
from stratagem.cluster.collectives import _parts
from stratagem.cluster.flowsets import Shapes
from stratagem.cluster.patterns import (
    inorder_depth,
    inorder_parents,
    ring_flows,
    tree_edges,
)


@pytest.mark.parametrize("name", ["v100-2x8", "h100-4x8", "k80-16x4"])
def test_shifted_flows_equal_flows_group_by_group(name):
    cluster = load(name)
    per = cluster.spec.devices_per_node
    rng = np.random.default_rng(2)
    for _ in range(20):
        nodes = cluster.spec.num_nodes
        span = int(rng.integers(1, nodes + 1))
        shape = sorted({int(d) for d in rng.integers(0, span * per, int(rng.integers(2, span * per + 1)))})
        if len(shape) < 2:
            continue
        starts = sorted({int(s) for s in rng.integers(0, nodes - span + 1, 3)})
        groups = [tuple(d + s * per for d in shape) for s in starts]
        shapes = Shapes(groups, per)
        for build in (lambda g: ring_flows(cluster.ring_channels(g)), lambda g: tree_edges(_parts(cluster, g))[0]):
            got = shapes.flows(shapes.each(build))
            expected = [flow for group in groups for flow in build(group)]
            assert list(zip(got.src.tolist(), got.dst.tolist(), got.weights.tolist())) == expected


def test_inorder_depth_is_the_tree_depth():
    def depth(parents):
        def up(i):
            steps = 0
            while parents[i] is not None:
                i, steps = parents[i], steps + 1
            return steps
        return max(up(i) for i in range(len(parents)))
    assert all(inorder_depth(n) == depth(inorder_parents(n)) for n in range(1, 600))
