"""Presets load with the shapes their sources give; routes are connected chains of links."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratagem.cluster import load, preset_names
from stratagem.errors import ConfigError

NAMED = {"p100-4x4": (4, 4, "P100-SXM2-16GB"), "k80-16x4": (16, 4, "K80-GK210-12GB"),
         "v100-2x8": (2, 8, "V100-SXM2-16GB"), "k80-1x8": (1, 8, "K80-GK210-12GB"),
         "a100-3x8": (3, 8, "A100-SXM4-80GB"), "h100-1x8": (1, 8, "H100-SXM5-80GB"),
         "h100-16x8": (16, 8, "H100-SXM5-80GB"), "cpu-1x4": (1, 4, "cpu")}


@pytest.mark.parametrize("name", sorted(NAMED))
def test_presets_load(name):
    nodes, per, kind = NAMED[name]
    cluster = load(name)
    assert cluster.name == name
    assert cluster.num_devices == nodes * per == len(cluster.devices)
    assert {d.kind for d in cluster.devices} == {kind}
    assert [cluster.node_of(d) for d in range(cluster.num_devices)] == [d // per for d in range(nodes * per)]
    assert all(len(node.devices) == per for node in cluster.nodes)


def test_every_preset_file_is_listed():
    assert {"p100-4x4", "k80-16x4", "v100-2x8", "k80-1x8", "a100-Nx8", "h100-Nx8", "cpu-1xN"} <= set(preset_names())


@pytest.mark.parametrize("name", ["v100-2x8", "k80-16x4", "h100-2x8", "p100-4x4"])
def test_routes_are_connected_chains_between_the_right_vertices(name):
    cluster = load(name)
    per = cluster.spec.devices_per_node
    for src in range(0, cluster.num_devices, 3):
        for dst in range(cluster.num_devices):
            links = cluster.route(src, dst)
            if src == dst:
                assert links == ()
                continue
            assert links[0].src == f"n{src // per}.d{src % per}"
            assert links[-1].dst == f"n{dst // per}.d{dst % per}"
            assert all(a.dst == b.src for a, b in zip(links, links[1:]))
            assert [cluster.links[link.id] for link in links] == list(links)


def test_routes_prefer_nvlink_and_avoid_forwarding_through_gpus():
    cluster = load("v100-2x8")
    assert [link.kind for link in cluster.route(0, 3)] == ["nvlink"]      # direct double link
    through = cluster.route(0, 5)                                          # no NVLink between 0 and 5
    assert all(".d" not in link.dst for link in through[:-1])
    assert "pcie.socket" in {link.kind for link in through}


def test_rail_aligned_nics_on_h100():
    cluster = load("h100-2x8")
    route = cluster.route(3, 11)        # local rank 3 on both nodes: its own NIC on each side
    assert [link.dst for link in route] == ["n0.nic3", "net", "n1.nic3", "n1.d3"]


def test_shaped_names_need_a_family_file():
    from stratagem.errors import ConfigError
    with pytest.raises(ConfigError, match="no cluster preset 'v100-4x8'"):
        load("v100-4x8")
    with pytest.raises(ConfigError, match=r"nodes >= 1"):
        load("a100-0x8")


def test_matrix_efficiency_per_dtype_from_a_cluster_file(tmp_path):
    from stratagem.cluster.spec import CALCULON_MATRIX
    text = (Path(__file__).parents[2] / "stratagem/cluster/presets/h100-Nx8.yaml").read_text()
    text = text.replace("nodes: N", "nodes: 1").replace("name: h100-Nx8", "name: mine")
    start = text.index("  matrix_efficiency:")
    end = text.index("fabrics:")
    curves = ("  matrix_efficiency:\n    default: [[1.0e+9, 0.5], [1.0e+11, 0.8]]\n"
              "    bfloat16: [[1.0e+9, 0.1], [1.0e+11, 0.7]]\n")
    path = tmp_path / "mine.yaml"
    path.write_text(text[:start] + curves + text[end:])
    device = load(str(path)).devices[0].spec
    assert device.efficiency("bfloat16", True).at(1e11) == 0.7 and device.efficiency("bfloat16", True).at(1e9) == 0.1
    assert device.efficiency("float32", True).at(1e9) == 0.5 and device.efficiency("tfloat32", True).at(1e11) == 0.8
    assert device.efficiency("bfloat16", False) is device.vector_efficiency
    assert load("h200-1x8").devices[0].spec.efficiency("float16", True) == CALCULON_MATRIX


def test_a_matrix_efficiency_mapping_with_a_bad_entry_is_refused(tmp_path):
    text = (Path(__file__).parents[2] / "stratagem/cluster/presets/h100-Nx8.yaml").read_text()
    text = text.replace("nodes: N", "nodes: 1").replace("name: h100-Nx8", "name: mine")
    start = text.index("  matrix_efficiency:")
    end = text.index("fabrics:")
    path = tmp_path / "bad.yaml"
    path.write_text(text[:start] + "  matrix_efficiency:\n    bfloat16: [[1.0e+9, 1.5]]\n" + text[end:])
    with pytest.raises(ConfigError, match=r"matrix_efficiency\.bfloat16"):
        load(str(path))
