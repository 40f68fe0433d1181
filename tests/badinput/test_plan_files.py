"""Bad plan and frontier files: each is refused with a ConfigError that names the file and the field,
what was expected and what came (Plan.load, Frontier.load), and `stratagem simulate` prints the same
as `stratagem simulate: error: ...` with exit code 2. The record spoiled is data parallel for
mlp-tiny on cpu-1x2."""

from __future__ import annotations

import json

import pytest

from stratagem.errors import StratagemError
from stratagem.plan import Frontier, Plan

from .helpers import assert_says, refused

CONFIG = "expected {\"first_device\": int, \"levels\": [[dim or null, size], ...], \"state\": \"sharded\" | \"sharded_kept\" | \"offloaded\" (optional)}"


def written(tmp_path, data, name="plan.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def load_refused(path, *fragments: str) -> None:
    """Plan.load and `stratagem simulate` refuse the file with the same message."""
    with pytest.raises(StratagemError) as error:
        Plan.load(path)
    assert_says(str(error.value), *fragments)
    assert_says(refused("simulate", str(path)), str(error.value))


@pytest.mark.parametrize("key, value, fragments", [
    ("num_devices", "two", ["field 'num_devices' is not valid", "expected an integer >= 1", "got 'two'"]),
    ("num_devices", 0, ["field 'num_devices' is not valid", "got 0"]),
    ("num_devices", -2, ["field 'num_devices' is not valid", "got -2"]),
    ("num_devices", 2.5, ["field 'num_devices' is not valid", "got 2.5"]),
    ("num_devices", True, ["field 'num_devices' is not valid", "got True"]),
    ("num_devices", 1, ["field 'strategy.ops.linear' is not valid", "a configuration on devices 0..0 (num_devices is 1)",
                        "got 'b2@0-1'"]),
    ("strategy", [], ["field 'strategy' is not a mapping", "got list"]),
    ("strategy", "data-parallel", ["field 'strategy' is not a mapping", "got str"]),
    ("strategy", {}, ["field 'strategy.ops' is missing"]),
    ("strategy", {"ops": {}}, ["field 'strategy.ops': strategy lacks ops", "none for ['linear'"]),
    ("strategy", {"ops": []}, ["field 'strategy.ops' is not a mapping", "got list"]),
    ("iteration_time_s", "fast", ["field 'iteration_time_s' is not valid", "expected a number >= 0 (NaN when not",
                                  "got 'fast'"]),
    ("iteration_time_s", None, ["field 'iteration_time_s' is not valid", "got None"]),
    ("peak_memory_bytes", [1], ["field 'peak_memory_bytes' is not valid", "got [1]"]),
    ("peak_memory_bytes", -5, ["field 'peak_memory_bytes' is not valid", "got -5"]),
    ("cluster", 42, ["field 'cluster' is not valid", "expected a non-empty string", "got 42"]),
    ("cluster", None, ["field 'cluster' is not valid", "got None"]),
    ("optimizer", 3, ["field 'optimizer' is not valid", "got 3"]),
    ("algorithm", 3, ["field 'algorithm' is not valid", "expected a string", "got 3"]),
    ("model", [], ["field 'model' is not valid", "got []"]),
    ("details", [1, 2], ["field 'details' is not a mapping", "got list"]),
    ("graph", "mlp", ["field 'graph': graph record is malformed"]),
])
def test_wrong_types_are_refused_naming_the_field(plan_record, tmp_path, key, value, fragments):
    if key == "strategy" and isinstance(value, dict) and "ops" in value:
        value = {**plan_record["strategy"], **value}
    plan_record[key] = value
    path = written(tmp_path, plan_record)
    load_refused(path, str(path), *fragments)


@pytest.mark.parametrize("key", ["graph", "strategy", "cluster", "num_devices", "iteration_time_s",
                                 "peak_memory_bytes"])
def test_missing_keys_are_named(plan_record, tmp_path, key):
    del plan_record[key]
    path = written(tmp_path, plan_record)
    load_refused(path, f"field '{key}' is missing", f"expected a value for '{key}'")


@pytest.mark.parametrize("version, fragments", [
    (6, ["unsupported plan file version", "expected format_version 5 (or 1 to 4, which it migrates)", "got 6",
         "Upgrade stratagem"]),
    (0, ["unsupported plan file version", "got 0", "Write the plan again with this version of stratagem"]),
    ("5", ["unsupported plan file version", "got '5'"]),
    (None, ["unsupported plan file version", "got None"]),
])
def test_other_format_versions_say_which_is_read_and_what_to_do(plan_record, tmp_path, version, fragments):
    plan_record["format_version"] = version
    load_refused(written(tmp_path, plan_record), *fragments)


@pytest.mark.parametrize("record, fragments", [
    ("b2", ["field 'strategy.ops.linear' is not a mapping", "got str"]),
    ({"first_device": 0, "levels": "b2"}, ["'strategy.ops.linear': configuration record is malformed", CONFIG]),
    ({"first_device": 0, "levels": [["b"]]}, ["configuration record is malformed"]),
    ({"first_device": 0, "levels": [[5, 2]]}, ["configuration record is malformed"]),
    ({"levels": [["b", 2]]}, ["configuration record is malformed", "got {'levels': [['b', 2]]}"]),
    ({"first_device": 0, "levels": [["b", 0]]}, ["'strategy.ops.linear': mesh axis size is not valid", "got 0"]),
    ({"first_device": 0, "levels": [["b", -2]]}, ["mesh axis size is not valid", "got -2"]),
    ({"first_device": 0, "levels": [["b", "2"]]}, ["mesh axis size is not valid", "got '2'"]),
    ({"first_device": 0, "levels": [["b", 2.5]]}, ["mesh axis size is not valid", "got 2.5"]),
    ({"first_device": -1, "levels": [["b", 2]]}, ["first device is not valid", "expected an integer >= 0"]),
    ({"first_device": 2, "levels": [["b", 2]]}, ["'strategy.ops.linear' is not valid", "got 'b2@2-3'"]),
    ({"first_device": 0, "levels": [["b", 4]]}, ["'strategy.ops.linear' is not valid", "(num_devices is 2)",
                                                 "got 'b4@0-3'"]),
    ({"first_device": 0, "levels": [["b", 2]], "state": "zero3"},
     ["unknown weight state", "expected replicated | sharded | sharded_kept | offloaded", "got 'zero3'"]),
    ({"first_device": 0, "levels": [["b", 2]], "state": 3}, ["configuration record is malformed", "\"state\""]),
    ({"first_device": 0, "levels": [["j", 2]], "state": "sharded"},
     ["cannot hold its weights sharded under j2@0-1", "a data-parallel axis", "got state 'sharded'",
      "Give this op the state 'replicated'"]),
])
def test_malformed_configurations_are_refused(plan_record, tmp_path, record, fragments):
    plan_record["strategy"]["ops"]["linear"] = record
    load_refused(written(tmp_path, plan_record), *fragments)


def test_a_strategy_naming_ops_not_in_its_graph_is_refused(plan_record, tmp_path):
    plan_record["strategy"]["ops"]["ghost"] = plan_record["strategy"]["ops"]["relu"]
    load_refused(written(tmp_path, plan_record), "field 'strategy.ops'", "strategy names ops graph 'mlp-tiny' does not "
                 "have", "got ['ghost']")


def test_a_strategy_missing_ops_is_refused(plan_record, tmp_path):
    del plan_record["strategy"]["ops"]["relu_1"]
    load_refused(written(tmp_path, plan_record), "strategy lacks ops", "none for ['relu_1']")


def test_a_dim_the_op_lacks_is_refused_when_priced(plan_record, tmp_path):
    plan_record["strategy"]["ops"]["linear"]["levels"] = [["zz", 2]]
    path = written(tmp_path, plan_record)
    assert_says(refused("simulate", str(path)), "op 'linear' has no dim 'zz'", "expected one of ['b', 'j', 'k']")


@pytest.mark.parametrize("reuse, fragments", [
    ([1], ["field 'strategy.reuse' is not a mapping", "got list"]),
    ({"features:None->linear": 7}, ["field 'strategy.reuse.features:None->linear' is not valid", "got 7"]),
    ({"nonsense": "keep_after"}, ["field 'strategy.reuse.nonsense': edge name is malformed",
                                  "expected \"tensor:source op->consumer op\""]),
])
def test_malformed_reuse_choices_are_refused(plan_record, tmp_path, reuse, fragments):
    plan_record["strategy"]["reuse"] = reuse
    load_refused(written(tmp_path, plan_record), *fragments)


def test_a_reuse_choice_for_an_edge_the_graph_lacks_is_refused(plan_record, tmp_path):
    plan_record["strategy"]["reuse"] = {"x:y->z": "keep"}
    path = written(tmp_path, plan_record)
    assert_says(refused("simulate", str(path)), "reuse choices name edges the graph does not have", "got x:y->z")


def test_a_plan_for_more_devices_than_the_cluster_has_is_refused(plan_record, tmp_path):
    plan_record["num_devices"] = 4
    path = written(tmp_path, plan_record)
    assert Plan.load(path).num_devices == 4               # a plan may leave devices idle ...
    assert_says(refused("simulate", str(path)), "device count on cluster 'cpu-1x2' is not valid",
                "expected an integer in 1..2", "got 4")   # ... but not ones its cluster lacks


@pytest.mark.parametrize("content, fragments", [
    (b"", ["is empty", "expected a JSON object"]),
    (b"  \n\n", ["is empty"]),
    (bytes(range(256)), ["is not a text file", "expected UTF-8 text", "got byte 0x80 at offset 128"]),
    (b'{"format_version": 1,', ["is not valid JSON", "at line 1, column 22"]),
    (b"[1, 2]", ["field '<top>' is not a mapping", "got list"]),
    (b"5", ["field '<top>' is not a mapping", "got int"]),
    (b'{"format_version": 1, "format_version": 1}', ["gives a key twice", "got 'format_version' twice"]),
])
def test_files_that_are_not_plan_records_are_refused(tmp_path, content, fragments):
    path = tmp_path / "plan.json"
    path.write_bytes(content)
    load_refused(path, *fragments)


def test_a_saved_plan_loads_as_it_was(dp_plan, plan_path):
    loaded = Plan.load(plan_path)
    assert loaded.strategy == dp_plan.strategy and loaded.num_devices == dp_plan.num_devices
    assert loaded.iteration_time_s == dp_plan.iteration_time_s


@pytest.fixture
def frontier_record(graph, tmp_path):
    from stratagem.search.planner import frontier
    path = tmp_path / "frontier.json"
    frontier(graph, "cpu-1x2").save(path)
    return json.loads(path.read_text())


@pytest.mark.parametrize("spoil, fragments", [
    (lambda r: r.update(plans="all"), ["field 'plans' is not valid", "expected a list"]),
    (lambda r: r.pop("plans"), ["field 'plans' is missing"]),
    (lambda r: r.update(graph=None), ["field 'graph' is not valid", "expected the graph the plans were made for"]),
    (lambda r: r.update(format_version=7), ["unsupported plan file version", "got 7"]),
    (lambda r: r["plans"][0].update(num_devices="two"), ["plans[0]: field 'num_devices' is not valid",
                                                         "got 'two'"]),
    (lambda r: r["plans"][0]["strategy"]["ops"].pop("relu"), ["plans[0]: field 'strategy.ops': strategy lacks ops"]),
])
def test_bad_frontier_files_are_refused_naming_the_plan(frontier_record, tmp_path, spoil, fragments):
    spoil(frontier_record)
    path = written(tmp_path, frontier_record, "frontier.json")
    with pytest.raises(StratagemError) as error:
        Frontier.load(path)
    assert_says(str(error.value), str(path), *fragments)

