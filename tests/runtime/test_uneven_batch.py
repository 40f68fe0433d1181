"""A batch that does not divide the device count: the cost model prices the data loader's layout
that the runtime uses (whole on every device; before, it was priced sharded and run whole), and
the plan trains as one process does."""

from __future__ import annotations

import pytest

from stratagem.cost import CostModel
from stratagem.cost.edgecost import source_layouts
from stratagem.frontend import zoo
from stratagem.runtime.schedule import build_schedule, on_mesh
from stratagem.runtime.session import RunOptions, run_plans
from stratagem.search.planner import search
from stratagem.space import REPLICATE, Shard

pytestmark = pytest.mark.numerics


@pytest.mark.parametrize("batch, placement", [(3, REPLICATE), (4, Shard(0))])
def test_the_cost_model_and_the_runtime_lay_out_the_batch_alike(batch, placement):
    graph = zoo.build("mlp-tiny", batch_size=batch)
    model = CostModel(graph, "cpu-1x2")
    plan = search(graph, "cpu-1x2", algorithm="data-parallel")
    schedule = build_schedule(graph, plan.strategy, 2, 0)
    for name in graph.inputs:
        priced, _ = source_layouts(model, name, None, None)
        assert on_mesh(priced) == schedule.sources[name]
    features = next(n for n in graph.inputs if graph.tensors[n].sample_dim is not None)
    assert schedule.sources[features].placements == (placement,)


def test_a_plan_for_an_uneven_batch_trains_as_one_process_does(tmp_path):
    graph = zoo.build("mlp-tiny", batch_size=3)
    path = tmp_path / "plan.json"
    search(graph, "cpu-1x2", algorithm="ft").save(path)
    (report,) = run_plans([path], RunOptions(steps=2, check=True, timeout_s=120))
    assert report["check"]["same_training"], report["check"]
