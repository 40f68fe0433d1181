"""A plan as one rank executes it: meshes, parameter and loader layouts, and each rank's share."""

from __future__ import annotations

from stratagem.runtime.schedule import build_schedule
from stratagem.runtime.views import worker_view
from stratagem.space import REPLICATE, Configuration, Level, Partial, Shard
from stratagem.space.tensor_layout import loader_layout
from stratagem.tdl.graphops import AnalysisCache

from .plans import plan


def test_meshes_include_every_op_mesh_and_the_refinements_between_them():
    p = plan("lenet-tiny", "tofu-like", 4)
    shapes = {c.mesh_shape for c in p.strategy.values()}
    assert shapes == {(4,), (2, 2)}
    schedule = build_schedule(p.graph, p.strategy, 4, 0)
    assert set(schedule.mesh_shapes) == {(4,), (2, 2)}


def test_parameters_live_where_their_owner_reads_them():
    p = plan("mlp-tiny", "owt", 2)
    schedule = build_schedule(p.graph, p.strategy, 2, 1)
    assert p.strategy["linear"] == Configuration((Level("j", 2),))
    assert schedule.sources["hidden.0.weight"].placements == (Shard(0),)
    assert schedule.sources["hidden.0.bias"].placements == (Shard(0),)


def test_the_loader_shards_the_batch_when_it_divides_and_replicates_it_otherwise():
    graph = plan("mlp-tiny", "owt", 2).graph
    assert loader_layout(graph.tensors["features"], 2).placements == (Shard(0),)
    assert loader_layout(graph.tensors["features"], 3).placements == (REPLICATE,)
    assert loader_layout(graph.tensors["labels"], 4).placements == (Shard(0),)


def test_under_a_split_reduction_only_the_first_worker_reads_the_bias():
    graph = plan("mlp-tiny", "owt", 2).graph
    analysis = AnalysisCache(graph)["linear_1"]
    config = Configuration((Level("b", 2), Level("k", 2)))
    views = [worker_view(analysis, config, d) for d in range(4)]
    assert [v.reads[2] for v in views] == [True, False, True, False]
    assert views[3].assignment == {"b": (4, 8), "k": (16, 32)} and views[3].out_shape == (4, 32)


def test_a_one_device_plan_runs_on_a_one_element_mesh():
    p = plan("mlp-tiny", "ft", 2)
    single = {op: Configuration() for op in p.strategy}
    schedule = build_schedule(p.graph, single, 1, 0)
    assert schedule.mesh_shapes == ((1,),)
    assert all(s.outputs.placements == (REPLICATE,) for s in schedule.steps)
    assert not any(isinstance(pl, Partial) for s in schedule.steps for pl in s.outputs.placements)
