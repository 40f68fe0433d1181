"""Switch levels between nodes: the `network.switches` section of a cluster file, its errors, and
the switch tree it gives (how many switches, what their uplinks carry, which links routes climb)."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from stratagem.cluster import load
from stratagem.cluster.loader import PRESET_DIR
from stratagem.cluster.spec import SwitchLevel, SwitchLevels
from stratagem.errors import ConfigError
from tests.cluster.helpers import leaf_spine_cluster

GiB = 1 << 30
THREE_LEVELS = [{"name": "leaf", "nodes": 2},
                {"name": "pod", "nodes": 4, "oversubscription": 2, "latency_s": 2e-6},
                {"name": "core", "oversubscription": "3:1", "latency_s": 5e-6}]


@pytest.fixture
def h100():
    """h100-Nx8 at 8 nodes as a file's content, with two switch levels."""
    data = yaml.safe_load((PRESET_DIR / "h100-Nx8.yaml").read_text())
    data.update(name="h100-8x8-leafspine", nodes=8)
    data["network"]["switches"] = {"levels": [{"name": "leaf", "nodes": 4},
                                              {"name": "spine", "oversubscription": "4:1", "latency_s": 1e-6}]}
    return data


def write(tmp_path, data, suffix=".yaml"):
    path = tmp_path / f"cluster{suffix}"
    path.write_text(json.dumps(data) if suffix == ".json" else yaml.safe_dump(data))
    return path


# ---- the format --------------------------------------------------------------------------------------

def test_a_file_with_switch_levels_loads(tmp_path, h100):
    cluster = load(write(tmp_path, h100))
    switches = cluster.spec.network.switches
    assert switches == SwitchLevels((SwitchLevel("leaf", 4), SwitchLevel("spine", None, 4.0, 1e-6)), False)
    tree = cluster.routes.switches
    assert tree.counts == (2,)                                   # 8 nodes in leaves of 4
    assert tree.up_bandwidth == (4 * 8 * 48.5e9 / 4,)            # 4 nodes x 8 NICs x NDR, 4:1
    assert len(cluster.links) == 8 * 48 + 2 * 2                  # the nodes' links, one up + one down per leaf
    json_copy = load(write(tmp_path, h100, ".json"))
    assert json_copy.collective_time_s("all_reduce", GiB, range(64)) == cluster.collective_time_s(
        "all_reduce", GiB, range(64))


def test_rails_and_three_levels():
    cluster = leaf_spine_cluster(12, 2, 2, nic_bandwidth=10e9, rails=True, levels=THREE_LEVELS)
    tree = cluster.routes.switches
    assert tree.names == ("leaf", "pod", "core") and tree.block_nodes == (2, 4)
    assert tree.counts == (6 * 2, 3)                             # a leaf per block and rail; 3 pods
    assert tree.up_bandwidth == (2 * 1 * 10e9 / 2, 4 * 2 * 10e9 / (2 * 3))
    assert tree.up_latency_s == (2e-6, 5e-6)


def test_a_partly_filled_last_leaf_keeps_its_uplinks():
    cluster = leaf_spine_cluster(5, 1, 2, oversubscription=2.0)
    assert cluster.routes.switches.counts == (3,)
    assert cluster.routes.switches.up_bandwidth == (2 * 10e9 / 2,)


@pytest.mark.parametrize("edit, field, expected", [
    (lambda s: s.update(levels=[]), "network.switches.levels", "at least one level"),
    (lambda s: s.update(levels="leaf"), "network.switches.levels", "a list"),
    (lambda s: s.update(rail=True), "network.switches.rail", "one of"),
    (lambda s: s.update(rails="yes"), "network.switches.rails", "true or false"),
    (lambda s: s["levels"][0].pop("nodes"), "network.switches.levels[0].nodes", "how many nodes"),
    (lambda s: s["levels"][0].update(nodes=0), "network.switches.levels[0].nodes", "an integer >= 1"),
    (lambda s: s["levels"][0].update(name="leaf0"), "network.switches.levels[0].name", "letters"),
    (lambda s: s["levels"][1].update(name="leaf"), "network.switches.levels[1].name", "a name no other"),
    (lambda s: s["levels"][0].update(oversubscription=2), "network.switches.levels[0].oversubscription",
     "no oversubscription on the first"),
    (lambda s: s["levels"][1].update(oversubscription=0.5), "network.switches.levels[1].oversubscription",
     "a ratio >= 1"),
    (lambda s: s["levels"][1].update(oversubscription="4 to 1"), "network.switches.levels[1].oversubscription",
     "a ratio >= 1"),
    (lambda s: s["levels"][1].update(oversubscription="1:0"), "network.switches.levels[1].oversubscription",
     "a ratio >= 1"),
    (lambda s: s["levels"][1].update(latency_s=-1), "network.switches.levels[1].latency_s", ">= 0"),
    (lambda s: (s["levels"][0].update(nodes=2), s["levels"][1].update(nodes=4)), "network.switches.levels[1].nodes",
     "at least the cluster's 8"),
    (lambda s: s["levels"].insert(1, {"name": "pod", "nodes": 6}), "network.switches.levels[1].nodes",
     "a multiple of the level below's 4 nodes"),
    (lambda s: s["levels"].insert(1, {"name": "pod"}), "network.switches.levels[1].nodes", "only the top level"),
    (lambda s: s.update(rails=True, levels=[{"name": "spine"}]), "network.switches.levels", "a level above the rail"),
])
def test_bad_switch_levels_say_what_was_expected(tmp_path, h100, edit, field, expected):
    data = copy.deepcopy(h100)
    edit(data["network"]["switches"])
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as error:
        load(path)
    message = str(error.value)
    assert f"'{field}'" in message and str(path) in message and expected in message, message


def test_errors_say_what_to_do(tmp_path, h100):
    h100["network"]["switches"]["levels"][1]["nodes"] = 4
    h100["network"]["switches"]["levels"][0]["nodes"] = 2
    with pytest.raises(ConfigError, match="Leave 'nodes' out at the top level, or add a level above"):
        load(write(tmp_path, h100))


# ---- routes over the levels --------------------------------------------------------------------------

def kinds(cluster, src, dst):
    return [link.kind for link in cluster.route(src, dst)]


def test_a_route_inside_a_leaf_never_climbs_and_one_across_leaves_does():
    cluster = leaf_spine_cluster(8, 2, 4, oversubscription=4.0, nic_latency_s=1e-6, spine_latency_s=3e-6)
    assert kinds(cluster, 0, 7) == ["nic", "net", "net", "nic"]                     # nodes 0 and 3: one leaf
    assert kinds(cluster, 0, 8) == ["nic", "net", "spine", "spine", "net", "nic"]   # nodes 0 and 4
    assert [link.dst for link in cluster.route(0, 8)] == ["n0.nic0", "leaf0", "spine", "leaf1", "n4.nic0", "n4.d0"]
    assert cluster.route_latency_s(0, 7) == pytest.approx(2e-6)
    assert cluster.route_latency_s(0, 8) == pytest.approx(2e-6 + 2 * 3e-6)          # a hop up, a hop down
    spine = cluster.route(0, 8)[2]
    assert spine.bandwidth_bytes_per_s == 4 * 2 * 10e9 / 4 and spine.node == -1


def test_rails_keep_a_route_on_one_leaf_only_between_nics_of_one_rail():
    cluster = leaf_spine_cluster(4, 2, 2, oversubscription=2.0, rails=True)
    assert [link.dst for link in cluster.route(1, 3)] == ["n0.nic1", "leaf0.rail1", "n1.nic1", "n1.d1"]
    assert [link.dst for link in cluster.route(1, 2)] == [
        "n0.nic1", "leaf0.rail1", "spine", "leaf0.rail0", "n1.nic0", "n1.d0"]
    assert kinds(cluster, 1, 5) == ["nic", "net", "spine", "spine", "net", "nic"]     # another leaf block


def test_three_levels_climb_only_as_high_as_needed():
    cluster = leaf_spine_cluster(12, 1, 2, levels=THREE_LEVELS)
    assert "pod" not in kinds(cluster, 0, 1)
    assert kinds(cluster, 0, 2).count("pod") == 2 and "core" not in kinds(cluster, 0, 2)
    assert kinds(cluster, 0, 4).count("pod") == 2 and kinds(cluster, 0, 4).count("core") == 2
    links = cluster.route(0, 11)
    assert all(a.dst == b.src for a, b in zip(links, links[1:]))
    assert [cluster.links[link.id] for link in links] == list(links)


def test_routes_as_arrays_match_routes_one_at_a_time():
    import numpy as np
    for cluster in (leaf_spine_cluster(12, 2, 2, rails=True, levels=THREE_LEVELS), load("h100-2048x8-leafspine")):
        rng = np.random.default_rng(5)
        src, dst = rng.integers(0, cluster.num_devices, 500), rng.integers(0, cluster.num_devices, 500)
        rows = cluster.routes.rows(src, dst)
        latency = cluster.routes.route_latency_s(rows)
        for i in range(len(src)):
            assert tuple(int(x) for x in rows[i] if x >= 0) == cluster.route_ids(int(src[i]), int(dst[i]))
            assert latency[i] == cluster.route_latency_s(int(src[i]), int(dst[i]))


def test_the_16384_gpu_preset():
    cluster = load("h100-2048x8-leafspine")
    assert cluster.num_devices == 16384 and len(cluster.devices) == 16384
    assert cluster.routes.switches.counts == (64 * 8,)                       # 64 units of 32 nodes, 8 rails
    assert cluster.routes.switches.up_bandwidth == (32 * 48.5e9 / 2,)       # a rail leaf's uplinks at 2:1
    assert len(cluster.links) == 2048 * 48 + 2 * 512
    assert cluster.devices[-1].node == 2047 and cluster.nodes[5].devices == tuple(range(40, 48))
    estimate = cluster.collective_estimate("all_reduce", GiB, [range(16384)])
    assert estimate.algorithm.startswith("hierarchical")
    flat = load("h100-2048x8").collective_estimate("all_reduce", GiB, [range(16384)])
    assert estimate.time_s > flat.time_s                                      # spine hops add latency
