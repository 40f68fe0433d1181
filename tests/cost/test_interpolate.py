"""Ops the measured table lacks, estimated from the measured ops of their kind (cost.interpolate)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from stratagem.cost import ComputeTable, CostModel, OpTiming
from stratagem.cost.compute import ComputeModel, roofline_time_s
from stratagem.cost.compute_table import Work
from stratagem.cost.interpolate import Measured, kind_of
from stratagem.cost.opcost import op_work
from stratagem.cost.oplayouts import OpLayouts, profile_requests
from stratagem.errors import ConfigError
from stratagem.ir import Attrs
from stratagem.space import SpaceOptions, enumerate_configurations
from tests.cost.graphs import mlp

OPTIONS = SpaceOptions(max_axes=1)
DEVICES = 8


def forward_ratio(roofline_s: float) -> float:
    """A made-up efficiency, linear in log R: what the interpolation reproduces exactly."""
    return 3.0 + 0.25 * math.log(roofline_s / 1e-6)


def backward_ratio(roofline_s: float) -> float:
    return 5.0 - 0.125 * math.log(roofline_s / 1e-6)


def works(graph):
    """Every (request, OpWork) a search over DEVICES devices prices, each distinct request once."""
    layouts = OpLayouts(graph)
    found = {}
    for op in graph.ops:
        for config in enumerate_configurations(layouts.analyses[op.name], DEVICES, OPTIONS):
            work = op_work(layouts, op.name, config)
            found.setdefault(work.request.key, work)
    return list(found.values())


def roofline(device, work) -> float:
    return roofline_time_s(device, work.flops, work.num_bytes + work.mask_bytes, work.dtype, work.matrix)


def synthetic_table(device, requests) -> ComputeTable:
    """Times that follow forward_ratio / backward_ratio of each request's recorded work."""
    entries = {}
    for r in requests:
        rs = roofline_time_s(device, r.work.flops, r.work.num_bytes, "float32", True)
        entries[r.key] = OpTiming(forward_ratio(rs) * rs, backward_ratio(rs) * rs, 10, r.work)
    return ComputeTable("cpu", entries)


@pytest.fixture(scope="module")
def setting():
    graph = mlp(64, 96, 160)
    device = CostModel(graph, f"cpu-1x{DEVICES}").device
    return graph, device, profile_requests(graph, DEVICES, OPTIONS)


def test_requests_carry_the_work_the_cost_model_prices_them_by(setting):
    graph, device, requests = setting
    by_key = {w.request.key: w for w in works(graph)}
    assert {r.key for r in requests} == set(by_key)
    for r in requests:
        w = by_key[r.key]
        assert r.work == Work(w.flops, w.num_bytes + w.mask_bytes)
        assert r.work.flops == 2 * math.prod(r.output_shape) * r.input_shapes[0][-1]      # a linear's


def test_a_held_out_size_is_estimated_from_its_neighbours(setting):
    """With efficiency linear in log R, leaving out any entry that has measured sizes of its kind
    on both sides gives it back (forward and backward) from the others."""
    graph, device, requests = setting
    table = synthetic_table(device, requests)
    tried = 0
    for work in works(graph):
        kind = kind_of(work.request.key)
        others = [roofline_time_s(device, r.work.flops, r.work.num_bytes, "float32", True)
                  for r in requests if kind_of(r.key) == kind and r.key != work.request.key]
        rq = roofline(device, work)
        if not others or not min(others) < rq < max(others):
            continue
        entries = {k: v for k, v in table.entries.items() if k != work.request.key}
        times = ComputeModel(device, ComputeTable("cpu", entries)).times(work)
        assert times.source == "interpolated"
        assert times.forward_time_s == pytest.approx(forward_ratio(rq) * rq, rel=1e-9)
        assert times.backward_time_s == pytest.approx(backward_ratio(rq) * rq, rel=1e-9)
        tried += 1
    assert tried >= 4


def test_measured_sizes_are_the_table_and_beyond_them_the_nearest_ratio(setting):
    graph, device, requests = setting
    table = synthetic_table(device, requests)
    model = ComputeModel(device, table)
    for work in works(graph):
        entry = table.lookup(work.request)
        assert (model.times(work).forward_time_s, model.times(work).backward_time_s) == (
            entry.forward_time_s, entry.backward_time_s)
    # the largest fc2 shard left out: beyond the rest, priced at the ratio of the next largest
    fc2 = sorted((w for w in works(graph) if w.request.requires_grad == (True, True)),
                 key=lambda w: roofline(device, w))
    largest, next_largest = fc2[-1], fc2[-2]
    rn = roofline(device, next_largest)
    assert rn < roofline(device, largest)
    entries = {k: v for k, v in table.entries.items() if k != largest.request.key}
    times = ComputeModel(device, ComputeTable("cpu", entries)).times(largest)
    assert times.forward_time_s == pytest.approx(forward_ratio(rn) * roofline(device, largest), rel=1e-9)


def test_other_kinds_and_tables_without_work_are_not_used(setting):
    graph, device, requests = setting
    work = works(graph)[0]
    plain = ComputeModel(device, None).times(work)
    kind = kind_of(work.request.key)
    table = synthetic_table(device, requests)
    other_kinds = {k: v for k, v in table.entries.items() if kind_of(k) != kind}
    assert other_kinds
    assert ComputeModel(device, ComputeTable("cpu", other_kinds)).times(work) == plain
    same_kind_no_work = {k: replace(v, work=None) for k, v in table.entries.items()
                         if kind_of(k) == kind and k != work.request.key}
    assert same_kind_no_work
    assert ComputeModel(device, ComputeTable("cpu", same_kind_no_work)).times(work) == plain
    attrs_differ = {(k[0], k[1], k[2], Attrs(k[3], alpha=2.0), k[4]): v for k, v in table.entries.items()
                    if kind_of(k) == kind and k != work.request.key}
    assert ComputeModel(device, ComputeTable("cpu", attrs_differ)).times(work) == plain


def test_estimate_interpolates_in_log_size():
    measured = Measured((1e-5, 1e-3), (2.0, 4.0), (1.0, 1.0))
    forward, backward = measured.estimate(1e-4)                  # halfway in log R
    assert forward == pytest.approx(3.0 * 1e-4) and backward == pytest.approx(1e-4)
    assert measured.estimate(1e-6) == pytest.approx((2e-6, 1e-6))
    assert measured.estimate(1e-2) == pytest.approx((4e-2, 1e-2))
    assert measured.estimate(1e-3) == pytest.approx((4e-3, 1e-3))


def test_work_is_saved_and_loaded_and_older_tables_still_load(tmp_path, setting):
    _, device, requests = setting
    table = synthetic_table(device, requests)
    path = tmp_path / "ops.json"
    table.save(path)
    loaded = ComputeTable.load(path)
    assert loaded.entries == table.entries
    data = table.to_json()
    for row in data["entries"]:
        del row["flops"], row["num_bytes"]
    assert all(t.work is None for t in ComputeTable.from_json(data).entries.values())
    data["entries"][0]["flops"] = 1.0                            # one of the two: not a valid entry
    with pytest.raises(ConfigError, match=r"entries\[0\]"):
        ComputeTable.from_json(data)
