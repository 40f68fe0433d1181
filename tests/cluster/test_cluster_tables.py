"""A cluster file names its measured tables: every command that loads the cluster prices with them."""

from __future__ import annotations

import pytest
import yaml

from stratagem.cluster import CommTable, cluster_data, load, load_spec, with_tables
from stratagem.cluster.comm_table import Series
from stratagem.cost import ComputeTable, CostModel, OpTiming
from stratagem.errors import ConfigError
from tests.cost.graphs import mlp

SERIES = Series((1024.0, 2048.0, 4096.0), (1e-4, 1e-4, 1.6e-4))


def tables(directory):
    comm = directory / "comm.json"
    CommTable("gloo", 2, "cpu", {("all_reduce", ((0, 1),)): SERIES}).save(comm)
    graph = mlp(8, 16, 4)
    model = CostModel(graph, "cpu-1x2")
    op = graph.ops[0].name
    config = model.configurations(op)[0]
    ops = directory / "ops.json"
    ComputeTable("cpu", {model.profile_request(op, config).key: OpTiming(0.25, 0.5, 10)}).save(ops)
    return ops, comm, graph, op, config


def test_a_written_cluster_file_names_its_tables_and_the_cost_model_uses_them(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "clusters").mkdir()
    ops, comm, graph, op, config = tables(tmp_path / "tables")
    out = tmp_path / "clusters" / "mine.yaml"
    with_tables("cpu-1x2", out, ops=ops)
    with_tables("cpu-1x2", out, comm=comm)                   # updates: keeps the ops table
    assert yaml.safe_load(out.read_text())["tables"] == {"ops": "../tables/ops.json", "comm": "../tables/comm.json"}
    assert cluster_data(out)["devices_per_node"] == 2 and load_spec(out).ops_table == str(ops.resolve())
    cluster = load(out)
    assert cluster.collective_time_s("all_reduce", 2048, [0, 1]) == pytest.approx(1e-4)
    cost = CostModel(graph, str(out)).op_cost(op, config)
    assert (cost.forward_time_s, cost.backward_time_s, cost.compute_source) == (0.25, 0.5, "table")
    assert CostModel(graph, "cpu-1x2").op_cost(op, config).compute_source == "roofline"


def test_a_table_that_is_not_there_is_named_in_the_error(tmp_path):
    data = cluster_data("cpu-1x2")
    data["tables"] = {"ops": "missing.json"}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"tables\.ops.*profile ops"):
        load(path)
    data["tables"] = {"opz": "missing.json"}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="unknown field 'tables.opz'"):
        load(path)


def test_only_a_yaml_cluster_file_is_written(tmp_path):
    with pytest.raises(ConfigError, match=r"\.yaml or \.yml"):
        with_tables("cpu-1x2", tmp_path / "c.json")
    assert not (tmp_path / "c.json").exists()
