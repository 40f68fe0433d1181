"""`stratagem profile ops` resolves MODEL through the zoo, with a clear error while there is none."""

from __future__ import annotations

import importlib.util

import pytest

from stratagem.cli import main


@pytest.mark.skipif(importlib.util.find_spec("stratagem.frontend.zoo") is not None,
                    reason="the model zoo exists in this checkout")
def test_profile_ops_without_a_zoo_is_a_clear_error(capsys):
    assert main(["profile", "ops", "mlp"]) == 2
    assert "model zoo (stratagem.frontend.zoo) is not in this checkout" in capsys.readouterr().err


def test_profile_comm_needs_two_processes(capsys):
    assert main(["profile", "comm", "--nproc", "1"]) == 2
    assert "at least 2 processes" in capsys.readouterr().err


def test_profile_ops_writes_a_cluster_file_that_plan_prices_with(tmp_path, capsys):
    pytest.importorskip("torch")
    from stratagem.cluster import load_spec
    from stratagem.cost import ComputeTable, CostModel
    from stratagem.planfile import load_plan

    ops, cluster, plan = tmp_path / "ops.json", tmp_path / "mine.yaml", tmp_path / "plan.json"
    assert main(["profile", "ops", "mlp-tiny", "--devices", "2", "--repeats", "10", "--warmup", "0",
                 "-o", str(ops), "--cluster-out", str(cluster)]) == 0
    assert f"plan with --cluster {cluster}" in capsys.readouterr().out
    assert load_spec(cluster).ops_table == str(ops.resolve()) and load_spec(cluster).num_devices == 2
    assert main(["plan", "mlp-tiny", "--cluster", str(cluster), "-o", str(plan)]) == 0
    loaded = load_plan(str(plan))
    model = CostModel(loaded.graph, loaded.cluster, num_devices=loaded.num_devices)
    table = ComputeTable.load(ops)
    measured = [op.name for op in loaded.graph.ops
                if table.lookup(model.profile_request(op.name, loaded.strategy[op.name])) is not None]
    assert measured and all(model.op_cost(name, loaded.strategy[name]).compute_source == "table" for name in measured)


def test_profile_ops_refuses_to_name_a_table_of_another_device_kind(tmp_path, capsys):
    pytest.importorskip("torch")
    ops, cluster = tmp_path / "ops.json", tmp_path / "mine.yaml"
    assert main(["profile", "ops", "mlp-tiny", "--devices", "2", "--repeats", "10", "--warmup", "0",
                 "-o", str(ops), "--cluster-out", str(cluster), "--cluster", "h100-1x8"]) == 2
    err = capsys.readouterr().err
    assert "another kind of device" in err and "H100-SXM5-80GB" in err and "--device-kind" in err
    assert ops.exists() and not cluster.exists()


def test_profile_ops_side_by_side_measures_every_op_as_ranks_run(tmp_path, capsys):
    pytest.importorskip("torch")
    from stratagem.cost import ComputeTable
    from stratagem.cost.oplayouts import profile_requests
    from stratagem.frontend import zoo
    from stratagem.space import SpaceOptions

    ops = tmp_path / "ops.json"
    assert main(["profile", "ops", "mlp-tiny", "--devices", "2", "--nproc", "2", "--repeats", "10",
                 "--warmup", "0", "-o", str(ops)]) == 0
    assert "by 2 processes side by side" in capsys.readouterr().out
    table = ComputeTable.load(ops)
    requests = profile_requests(zoo.build("mlp-tiny"), 2, SpaceOptions(runnable=True))
    assert {r.key for r in requests} == set(table.entries)
    assert all(t.forward_time_s > 0 for t in table.entries.values())
    overhead = table.runtime_overhead                  # measured by the ranks, each op split over both
    assert overhead is not None and overhead.forward_s(2) > 0 and overhead.backward_s(2) > 0
    assert all(t.work is not None for t in table.entries.values())
    assert any(t.work.flops > 0 for t in table.entries.values())
