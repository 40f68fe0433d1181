"""`profile ops`: a measured table on a hand-built graph changes what the cost model returns."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from stratagem.cost import ComputeTable, CostModel  # noqa: E402
from stratagem.cost.oplayouts import profile_requests  # noqa: E402
from stratagem.errors import ConfigError  # noqa: E402
from stratagem.runtime.profile_ops import profile, profile_graph  # noqa: E402
from stratagem.space import Configuration, SpaceOptions  # noqa: E402
from tests.cost.graphs import mlp  # noqa: E402

IMPLS = {"linear": lambda inputs, attrs, out_shape: torch.nn.functional.linear(*inputs)}
OPTIONS = SpaceOptions(max_axes=1)


def test_requests_are_the_distinct_local_ops(checked):
    graph = checked(mlp(8, 32, 64))
    requests = profile_requests(graph, 2, OPTIONS)
    shapes = {r.input_shapes for r in requests}
    assert ((4, 32), (64, 32)) in shapes          # fc1 split on the batch
    assert ((8, 16), (64, 16)) in shapes          # fc1 split on the reduction dim
    assert len(requests) == len({r.key for r in requests})
    # fc1 reads x (data, no gradient) and w1; fc2 reads h (computed from w1) and w2
    assert {r.requires_grad for r in requests} == {(False, True), (True, True)}


def test_profiled_table_is_preferred_and_round_trips(tmp_path, checked):
    graph = checked(mlp(8, 32, 64))
    table = profile_graph(graph, 2, OPTIONS, impls=IMPLS, repeats=10, warmup=1)
    assert table.device_kind == "cpu" and len(table) == len(profile_requests(graph, 2, OPTIONS))
    path = tmp_path / "ops.json"
    table.save(path)
    loaded = ComputeTable.load(path)
    assert loaded.entries == table.entries and loaded.runtime_overhead == table.runtime_overhead
    overhead = table.runtime_overhead
    assert overhead.forward_time_s > 0 and overhead.backward_time_s >= 0
    plain = CostModel(graph, "cpu-1x2")
    measured = CostModel(graph, "cpu-1x2", compute_table=path)
    config = Configuration.of(b=2)
    entry = table.lookup(measured.profile_request("fc2", config))
    cost = measured.op_cost("fc2", config)
    assert (cost.forward_time_s, cost.backward_time_s) == (entry.forward_time_s + overhead.forward_s(2),
                                                           entry.backward_time_s + overhead.backward_s(2))
    assert cost.compute_source == "table" and plain.op_cost("fc2", config).compute_source == "roofline"
    assert cost.forward_time_s != plain.op_cost("fc2", config).forward_time_s
    assert entry.backward_time_s > 0 and entry.repeats == 10


def test_the_runtime_overhead_is_added_to_every_op_the_table_prices(checked):
    """Per op, per input read in forward, per input gradient in backward: fc1 reads x and w1 and
    hands back w1's gradient; fc2 reads h and w2 and hands back both."""
    from stratagem.cost import RuntimeOverhead
    graph = checked(mlp(8, 32, 64))
    config = Configuration.of(b=2)
    bare = CostModel(graph, "cpu-1x2", compute_table=ComputeTable("cpu", {}))
    overhead = RuntimeOverhead(1e-4, 3e-5, 30, 2e-5, 7e-5)
    with_overhead = CostModel(graph, "cpu-1x2", compute_table=ComputeTable("cpu", {}, overhead))
    for op, gradients in (("fc1", 1), ("fc2", 2)):                # priced by the roofline: no entry
        a, b = bare.op_cost(op, config), with_overhead.op_cost(op, config)
        assert b.forward_time_s == pytest.approx(a.forward_time_s + 1e-4 + 2 * 2e-5)
        assert b.backward_time_s == pytest.approx(a.backward_time_s + 3e-5 + gradients * 7e-5)


def test_table_for_another_device_kind_is_refused(checked):
    graph = checked(mlp(8, 32, 64))
    table = ComputeTable("NVIDIA H100 80GB HBM3", {})
    with pytest.raises(ConfigError, match="another kind of device"):
        CostModel(graph, "cpu-1x2", compute_table=table)


def test_missing_implementations_and_too_few_repeats(checked):
    requests = profile_requests(checked(mlp(8, 32, 64)), 2, OPTIONS)
    with pytest.raises(ConfigError, match="no torch implementation"):
        profile(requests, impls={}, repeats=10)
    with pytest.raises(ConfigError, match=r"repeats \(for a stable mean\) is not valid"):
        profile(requests, impls=IMPLS, repeats=3)
