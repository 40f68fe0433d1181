"""Plan files: the Strategy (configurations and reuse choices) survives a save and a load, and
plan and frontier files of version 1 still load, migrated to the same plan."""

from __future__ import annotations

import json
import warnings

import pytest

import stratagem as sg
from stratagem.plan import FORMAT_VERSION, Frontier, Plan
from stratagem.report.replay import replay
from stratagem.search.context import context
from stratagem.search.ft_search import frontier


@pytest.fixture(scope="module")
def mlp_frontier():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = sg.zoo.build("mlp-tiny")
    return frontier(context(graph, "v100-2x8", 2))


def as_version_1(record: dict) -> dict:
    """A plan record as version 1 wrote it: the per-op configurations as "strategy", reuse beside."""
    old = dict(record, format_version=1)
    old["reuse"] = old["strategy"]["reuse"]
    old["strategy"] = old["strategy"]["ops"]
    return old


def test_reuse_choices_survive_a_save_and_replay_to_the_recorded_costs(mlp_frontier, tmp_path):
    chosen = [p for p in mlp_frontier if p.strategy.reuse]
    assert chosen, "FT chooses tensor reuse on mlp-tiny: the test needs such a plan"
    for i, plan in enumerate(chosen):
        plan.save(tmp_path / f"{i}.json")
        loaded = Plan.load(tmp_path / f"{i}.json")
        assert loaded.strategy == plan.strategy and loaded.strategy.reuse == plan.strategy.reuse
        assert replay(loaded).result().iteration_time_s == pytest.approx(plan.iteration_time_s, rel=1e-12)


def test_a_version_1_plan_file_loads_as_the_same_plan(mlp_frontier, tmp_path):
    plan = next(p for p in mlp_frontier if p.strategy.reuse)
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(as_version_1(plan.to_dict())))
    loaded = Plan.load(path)
    assert loaded.strategy == plan.strategy and loaded.iteration_time_s == plan.iteration_time_s
    loaded.save(path)                                  # written back in the current version
    assert json.loads(path.read_text())["format_version"] == FORMAT_VERSION


def test_a_version_1_frontier_file_loads_with_every_plan(mlp_frontier, tmp_path):
    record = mlp_frontier.to_dict()
    record["format_version"] = 1
    record["plans"] = [as_version_1(p) for p in record["plans"]]
    record["alternatives"] = [as_version_1(p) for p in record["alternatives"]]
    path = tmp_path / "frontier.json"
    path.write_text(json.dumps(record))
    loaded = Frontier.load(path)
    assert [p.strategy for p in loaded] == [p.strategy for p in mlp_frontier]


def test_offloaded_activations_survive_a_save_and_replay_and_a_version_4_file_has_none(tmp_path):
    from dataclasses import replace as with_model

    from stratagem.cost.recompute import blocks
    from stratagem.errors import ConfigError
    from stratagem.search import registry
    from stratagem.search.context import make_plan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ctx = context(sg.zoo.build("gpt-tiny-tiny"), "a100-1x8", 2)
    names = tuple(b.name for b in blocks(ctx.graph))
    plan = make_plan(with_model(ctx, model=ctx.model.with_activations(names[1:], names[:1])),
                     registry.run(ctx, "data-parallel").strategy, "dp")
    plan.save(tmp_path / "p.json")
    loaded = Plan.load(tmp_path / "p.json")
    assert (loaded.offload_activations, loaded.recompute) == (names[:1], names[1:])
    assert replay(loaded).result().peak_memory_bytes == pytest.approx(plan.peak_memory_bytes, rel=1e-12)
    record = plan.to_dict()
    old = {k: v for k, v in record.items() if k != "offload_activations"}
    (tmp_path / "v4.json").write_text(json.dumps(dict(old, format_version=4)))
    assert Plan.load(tmp_path / "v4.json").offload_activations == ()
    both = dict(record, offload_activations=list(names[1:]))
    (tmp_path / "both.json").write_text(json.dumps(both))
    with pytest.raises(ConfigError, match="offload_activations.*both recomputed and offloaded"):
        Plan.load(tmp_path / "both.json")
