"""Pipeline stages as a value (space.pipeline): ops and devices per stage, what crosses each cut,
what a stage may not do (leave its devices, share a weight with another stage), and plan files
that keep it."""

from __future__ import annotations

import pytest

from stratagem.cost.recompute import blocks
from stratagem.errors import ConfigError
from stratagem.frontend import zoo
from stratagem.plan import Plan
from stratagem.search.context import context
from stratagem.search.strategies import data_parallel_strategy
from stratagem.space import Configuration, Pipeline, Strategy, boundary_tensors, check_pipeline, stage_of, stage_ops
from stratagem.space.pipeline import staged


@pytest.fixture(scope="module")
def graph():
    return zoo.build("gpt-tiny", batch_size=2)


def cuts_of(graph, stages):
    found = blocks(graph)
    return tuple(found[len(found) * k // stages].ops[0] for k in range(1, stages))


def test_stages_are_contiguous_runs_covering_the_graph_once(graph):
    pipe = Pipeline(cuts_of(graph, 4), 4)
    ops = stage_ops(graph, pipe)
    assert [name for run in ops for name in run] == [op.name for op in graph.ops]
    assert [run[0] for run in ops[1:]] == list(pipe.cuts)
    assert set(stage_of(graph, pipe).values()) == {0, 1, 2, 3}
    assert pipe.stage_devices(16) == (range(0, 4), range(4, 8), range(8, 12), range(12, 16))
    assert [pipe.in_flight(s) for s in range(4)] == [4, 3, 2, 1]
    assert Pipeline(pipe.cuts, 4, "gpipe").in_flight(3) == 4


def test_boundary_tensors_are_what_a_later_stage_reads_of_an_earlier_one(graph):
    pipe = Pipeline(cuts_of(graph, 2), 2)
    stage = stage_of(graph, pipe)
    (crossing,) = boundary_tensors(graph, pipe)
    producer = graph.producer
    expected = {t for op in graph.ops if stage[op.name] == 1 for t in op.inputs
                if t in producer and stage[producer[t].name] == 0}
    assert set(crossing) == expected and expected


def test_staged_moves_each_op_into_its_stage_block(graph):
    pipe = Pipeline(cuts_of(graph, 2), 2)
    per_stage = data_parallel_strategy(context(graph, "a100-1x8", 4))
    placed = staged(graph, pipe, 8, per_stage)
    stage = stage_of(graph, pipe)
    for op in graph.ops:
        assert placed[op.name].levels == per_stage[op.name].levels
        assert placed[op.name].first_device == per_stage[op.name].first_device + 4 * stage[op.name]
    check_pipeline(graph, placed, pipe, 8)


def test_an_op_outside_its_stage_is_refused(graph):
    pipe = Pipeline(cuts_of(graph, 2), 2)
    placed = staged(graph, pipe, 8, data_parallel_strategy(context(graph, "a100-1x8", 4)))
    last = graph.ops[-1].name
    placed[last] = Configuration((), 0)
    with pytest.raises(ConfigError, match=f"op '{last}' of stage 1 runs outside the stage's devices"):
        check_pipeline(graph, placed, pipe, 8)


def test_a_weight_read_in_two_stages_is_refused():
    tied = zoo.build("transformer-tiny")          # embedding and output projection share a weight
    pipe = Pipeline(cuts_of(tied, 2), 1)
    placed = staged(tied, pipe, 2, {op.name: Configuration((), 0) for op in tied.ops})
    with pytest.raises(ConfigError, match="is read in stages 0 and 1"):
        check_pipeline(tied, placed, pipe, 2)


@pytest.mark.parametrize("bad,match", [
    (dict(cuts=("no_such_op",)), "names an op the graph does not have"),
    (dict(schedule="interleaved"), "unknown pipeline schedule"),
    (dict(micro_batches=0), "micro-batch count is not valid"),
])
def test_bad_pipelines_are_refused_with_what_was_expected(graph, bad, match):
    fields = dict(cuts=cuts_of(graph, 2), micro_batches=2, schedule="1f1b") | bad
    with pytest.raises(ConfigError, match=match):
        stage_ops(graph, Pipeline(**fields))
    with pytest.raises(ConfigError, match="do not divide"):
        Pipeline(cuts_of(graph, 4), 2).stage_devices(6)


def test_plan_files_keep_the_pipeline_and_refuse_a_broken_one(graph, tmp_path):
    pipe = Pipeline(cuts_of(graph, 2), 4, "gpipe")
    strategy = Strategy(staged(graph, pipe, 8, data_parallel_strategy(context(graph, "a100-1x8", 4))), pipeline=pipe)
    plan = Plan(graph, "a100-1x8", 8, strategy, algorithm="pipeline")
    plan.save(tmp_path / "p.json")
    loaded = Plan.load(tmp_path / "p.json")
    assert loaded.strategy == strategy and loaded.strategy.pipeline == pipe
    data = plan.to_dict()
    data["strategy"]["pipeline"]["cuts"] = [graph.ops[-1].name, graph.ops[3].name]
    with pytest.raises(ConfigError, match="pipeline"):
        Plan.from_dict(data)
    old = plan.to_dict()
    del old["strategy"]["pipeline"]
    old["format_version"] = 3
    assert Plan.from_dict(old).strategy.pipeline is None
