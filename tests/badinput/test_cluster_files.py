"""Bad cluster files (YAML and JSON): each is refused with a ConfigError naming the file and the
field (or the line and column of a syntax error), what was expected and what came; never a
traceback, never a value taken silently. The record spoiled is the cpu-1xN preset at N = 2."""

from __future__ import annotations

import json
import math

import pytest
import yaml

import stratagem as sg
from stratagem.errors import ConfigError

from .helpers import assert_says, refused

LINK = ("fabrics", 0, "link")
POSITIVE = "expected a finite number > 0"
NON_NEGATIVE = "expected a finite number >= 0"
SIZE = "expected a size > 0, e.g. 16GB"
DELETE = object()


def spoil(record, path, value):
    *head, last = path
    for key in head:
        record = record[key]
    if value is DELETE:
        del record[last]
    else:
        record[last] = value


def load_refused(path, *fragments: str) -> str:
    with pytest.raises(ConfigError) as error:
        sg.cluster(path)
    assert_says(str(error.value), str(path), *fragments)
    return str(error.value)


def write_yaml(tmp_path, record, name="cluster.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(record))
    return path


@pytest.mark.parametrize("path, value, fragments", [
    ((*LINK, "bandwidth_bytes_per_s"), 0, ["'fabrics[0].link.bandwidth_bytes_per_s' is not valid", POSITIVE, "got 0"]),
    ((*LINK, "bandwidth_bytes_per_s"), -1e9, ["bandwidth_bytes_per_s", POSITIVE, "got -1000000000.0"]),
    ((*LINK, "bandwidth_bytes_per_s"), math.inf, ["bandwidth_bytes_per_s", POSITIVE, "got inf"]),
    ((*LINK, "bandwidth_bytes_per_s"), math.nan, ["bandwidth_bytes_per_s", POSITIVE, "got nan"]),
    ((*LINK, "bandwidth_bytes_per_s"), "fast", ["bandwidth_bytes_per_s", POSITIVE, "got 'fast'"]),
    ((*LINK, "bandwidth_bytes_per_s"), True, ["bandwidth_bytes_per_s", POSITIVE, "got True"]),
    ((*LINK, "latency_s"), -1e-6, ["'fabrics[0].link.latency_s' is not valid", NON_NEGATIVE, "got -1e-06"]),
    ((*LINK, "latency_s"), math.inf, ["latency_s", NON_NEGATIVE, "got inf"]),
    ((*LINK, "latency_s"), math.nan, ["latency_s", NON_NEGATIVE, "got nan"]),
    (("device", "memory_bytes"), 0, ["'device.memory_bytes' is not valid", SIZE, "got 0"]),
    (("device", "memory_bytes"), -1, ["device.memory_bytes", SIZE, "got -1"]),
    (("device", "memory_bytes"), math.inf, ["device.memory_bytes", SIZE, "got inf"]),
    (("device", "memory_bytes"), "lots", ["device.memory_bytes", SIZE, "got 'lots'"]),
    (("device", "matrix_flops_per_s", "float32"), 0, ["'device.matrix_flops_per_s.float32'", POSITIVE, "got 0"]),
    (("device", "matrix_flops_per_s", "default"), math.inf, ["matrix_flops_per_s.default", POSITIVE, "got inf"]),
    (("device", "vector_flops_per_s", "default"), -1, ["vector_flops_per_s.default", POSITIVE, "got -1"]),
    (("device", "matrix_flops_per_s"), {}, ["'device.matrix_flops_per_s' is not valid",
                                            "expected at least one dtype: peak entry"]),
    (("device", "matrix_flops_per_s"), 9e10, ["'device.matrix_flops_per_s' is not a mapping", "got float"]),
    (("device", "memory_bandwidth_bytes_per_s"), math.inf, ["memory_bandwidth_bytes_per_s", POSITIVE, "got inf"]),
    (("device", "launch_overhead_s"), -1, ["device.launch_overhead_s", NON_NEGATIVE, "got -1"]),
    (("device", "matrix_efficiency"), [[1e4, 1.5]], ["matrix_efficiency[0]", "expected an efficiency in (0, 1]",
                                                     "got 1.5"]),
    (("device", "matrix_efficiency"), [[1e6, 0.5], [1e4, 0.1]], ["matrix_efficiency",
                                                                 "expected pairs with sizes strictly ascending"]),
    (("nodes",), 0, ["'nodes' is not valid", "expected an integer >= 1", "got 0"]),
    (("nodes",), -1, ["'nodes' is not valid", "got -1"]),
    (("nodes",), "two", ["'nodes' is not valid", "got 'two'"]),
    (("nodes",), 1.5, ["'nodes' is not valid", "got 1.5"]),
    (("devices_per_node",), 0, ["'devices_per_node' is not valid", "expected an integer >= 1", "got 0"]),
    (("collectives", "protocols", 0, "bandwidth_factor"), 0, ["protocols[0].bandwidth_factor", POSITIVE]),
    (("collectives", "protocols", 0, "base_latency_s"), math.inf, ["protocols[0].base_latency_s", NON_NEGATIVE]),
    (("collectives", "protocols"), [], ["'collectives.protocols' is not valid", "expected at least one protocol"]),
    (("collectives", "reduction_s_per_byte"), -1, ["reduction_s_per_byte", NON_NEGATIVE, "got -1"]),
    (("name",), "", ["'name' is not valid", "expected a non-empty string", "got ''"]),
    (("device", "kind"), None, ["'device.kind' is not valid", "got None"]),
])
def test_bad_values_are_refused_naming_the_field(cluster_record, tmp_path, path, value, fragments):
    spoil(cluster_record, path, value)
    load_refused(write_yaml(tmp_path, cluster_record), *fragments)


@pytest.mark.parametrize("path, fragments", [
    (("device",), ["field 'device' is missing", "expected a value for 'device'"]),
    (("name",), ["field 'name' is missing"]),
    (("nodes",), ["field 'nodes' is missing"]),
    ((*LINK, "bandwidth_bytes_per_s"), ["field 'fabrics[0].link.bandwidth_bytes_per_s' is missing",
                                        "got keys ['latency_s']"]),
])
def test_missing_keys_are_named(cluster_record, tmp_path, path, fragments):
    spoil(cluster_record, path, DELETE)
    load_refused(write_yaml(tmp_path, cluster_record), *fragments)


@pytest.mark.parametrize("where, typo, right", [
    ((), "devics_per_node", "devices_per_node"),
    (("device",), "memory_byte", "memory_bytes"),
    (LINK, "latncy_s", "latency_s"),
])
def test_unknown_keys_name_the_closest_known_one(cluster_record, tmp_path, where, typo, right):
    mapping = cluster_record
    for key in where:
        mapping = mapping[key]
    mapping[typo] = mapping.pop(right)
    load_refused(write_yaml(tmp_path, cluster_record), "unknown field", typo, f"Did you mean {right}?")


@pytest.mark.parametrize("path, value, fragments", [
    (("device",), [1], ["'device' is not a mapping", "got list"]),
    (("fabrics",), {"a": 1}, ["'fabrics' is not valid", "expected a list"]),
    (("fabrics", 0, "type"), "ring", ["'fabrics[0].type' is not valid",
                                      "expected one of 'mesh', 'switch', 'pcie_tree'"]),
    (("fabrics", 0, "name"), "d0", ["'fabrics[0].name' is not valid", "a fabric name other than d<i>"]),
])
def test_wrong_types_are_refused(cluster_record, tmp_path, path, value, fragments):
    spoil(cluster_record, path, value)
    load_refused(write_yaml(tmp_path, cluster_record), *fragments)


def mesh(pairs):
    return {"type": "mesh", "name": "nvlink", "link": {"bandwidth_bytes_per_s": 1e9, "latency_s": 0}, "pairs": pairs}


@pytest.mark.parametrize("extra, fragments", [
    (mesh([[0, 5, 1]]), ["'fabrics[1].pairs[0]' is not valid", "with devices in 0..1", "got [0, 5, 1]"]),
    (mesh([[1, 1, 1]]), ["'fabrics[1].pairs[0]' is not valid", "got [1, 1, 1]"]),
    (mesh([[0, 1, 1], [1, 0, 1]]), ["'fabrics[1].pairs[1]' is not valid", "each pair of devices once"]),
    ({"type": "switch", "name": "loopback", "link": {"bandwidth_bytes_per_s": 1e9, "latency_s": 0}},
     ["'fabrics[1].name' is not valid", "expected a name no other fabric has", "got 'loopback'"]),
])
def test_links_to_unknown_devices_and_duplicate_names_are_refused(cluster_record, tmp_path, extra, fragments):
    cluster_record["fabrics"].append(extra)
    load_refused(write_yaml(tmp_path, cluster_record), *fragments)


def test_a_network_attached_to_an_unknown_vertex_is_refused(cluster_record, tmp_path):
    cluster_record.update(nodes=2, network={"nics_per_node": 1, "attach": ["pcie.sw0"],
                                            "link": {"bandwidth_bytes_per_s": 1e9, "latency_s": 1e-6}})
    load_refused(write_yaml(tmp_path, cluster_record), "'network.attach[0]' is not valid", "got 'pcie.sw0'")


def test_devices_no_fabric_connects_are_refused(cluster_record, tmp_path):
    cluster_record["fabrics"] = []
    with pytest.raises(ConfigError, match="no route from device 0 to device 1.*add a link"):
        sg.cluster(write_yaml(tmp_path, cluster_record)).route(0, 1)


def test_several_nodes_need_a_network(cluster_record, tmp_path):
    cluster_record["nodes"] = 2
    load_refused(write_yaml(tmp_path, cluster_record), "'network' is not valid",
                 "expected a network section when nodes > 1")


@pytest.mark.parametrize("text, fragments", [
    ("name: x\nnodes: 1\n  devices_per_node: 2\n", ["is not valid YAML", "mapping values are not allowed here",
                                                  "at line 3, column 19"]),
    ("name: x\n\tnodes: 1\n", ["is not valid YAML", "at line 2, column 1"]),
    ("name: x\ndevice: {kind: cpu, memory_bytes: 1\n", ["is not valid YAML", "at line 3, column 1"]),
    ("name: x\nnodes: 1\nnodes: 2\n", ["is not valid YAML", "key 'nodes' given twice at line 3, column 1"]),
    ("", ["is empty", "expected key: value pairs"]),
    ("# only a comment\n", ["is empty"]),
    ("- 1\n- 2\n", ["field '<top>' is not a mapping", "got list"]),
    ("just text\n", ["field '<top>' is not a mapping", "got str"]),
])
def test_yaml_errors_keep_their_line_and_column(tmp_path, text, fragments):
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    load_refused(path, *fragments)


@pytest.mark.parametrize("text, fragments", [
    ('{"name": "x", "nodes": 1,}', ["is not valid JSON", "at line 1, column 26"]),
    ("", ["is empty", "expected a JSON object"]),
    ('{"nodes": 1, "nodes": 2}', ["gives a key twice", "got 'nodes' twice"]),
    ("[1, 2]", ["field '<top>' is not a mapping", "got list"]),
])
def test_json_cluster_files_are_checked_as_yaml_ones(tmp_path, text, fragments):
    path = tmp_path / "cluster.json"
    path.write_text(text)
    load_refused(path, *fragments)


def test_infinity_in_a_json_cluster_file_is_refused(cluster_record, tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(cluster_record).replace("2000000000.0", "Infinity"))
    load_refused(path, "bandwidth_bytes_per_s", POSITIVE, "got inf")


def test_a_binary_file_is_not_a_cluster_file(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_bytes(bytes(range(256)))
    load_refused(path, "is not a text file", "got byte 0x80 at offset 128")


def test_a_size_with_a_unit_is_memory_in_bytes(cluster_record, tmp_path):
    cluster_record["device"]["memory_bytes"] = "16GB"
    assert sg.cluster(write_yaml(tmp_path, cluster_record)).device(1).spec.memory_bytes == 16e9


def test_zero_latency_is_a_value_not_a_default(cluster_record, tmp_path):
    cluster_record["fabrics"][0]["link"]["latency_s"] = 0
    assert sg.cluster(write_yaml(tmp_path, cluster_record)).route(0, 1)[0].latency_s == 0.0


def test_planning_on_a_bad_cluster_file_is_refused_by_the_cli(cluster_record, tmp_path):
    cluster_record["fabrics"][0]["link"]["latency_s"] = math.inf
    path = write_yaml(tmp_path, cluster_record)
    assert_says(refused("plan", "mlp-tiny", "--cluster", str(path), "-o", str(tmp_path / "never.json")),
                "'fabrics[0].link.latency_s' is not valid", NON_NEGATIVE, "got inf")
