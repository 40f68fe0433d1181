"""report.blocks: per repeated block what a plan recomputes, shards and offloads, and what
recomputing each block saves and costs, against the cost model's whole-plan figures."""

from __future__ import annotations

import warnings

import pytest

from stratagem.cost.recompute import block_of, blocks
from stratagem.cost.sharing import credited_readers
from stratagem.frontend import zoo
from stratagem.report import blocks as block_report
from stratagem.report.replay import model_of
from stratagem.search import registry
from stratagem.search.context import context
from stratagem.search.selective import with_first_recomputed


@pytest.fixture(scope="module")
def ctx():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = zoo.build("gpt-tiny")
    return context(graph, "a100-1x8", 2)


def test_each_block_says_what_recomputing_it_saves_and_costs(ctx):
    """Data parallel (every op on both devices): the blocks' savings add up to what recomputing
    every block frees of the plan's activations, their costs to the time it adds; the plan
    recomputing its first block keeps that block's activations at the recomputed figure."""
    plan = with_first_recomputed(ctx, registry.run(ctx, "data-parallel"), 1)
    model = model_of(plan)
    rows = block_report.block_rows(plan, model)
    names = [b.name for b in blocks(ctx.graph)]
    assert [r.block for r in rows] == names and [r.recomputed for r in rows] == [True] + [False] * (len(names) - 1)
    every, none = model.recomputing(tuple(names)), model.recomputing(())
    strategy = plan.strategy
    freed = none.memory_parts(strategy)["activations"][0] - every.memory_parts(strategy)["activations"][0]
    added = every.plan_cost(strategy).time_s - none.plan_cost(strategy).time_s
    assert sum(r.recompute_saves_bytes for r in rows) == pytest.approx(freed, rel=1e-9)
    assert sum(r.recompute_costs_s for r in rows) == pytest.approx(added, rel=1e-9)
    assert all(r.recompute_saves_bytes > 0 and r.recompute_costs_s > 0 for r in rows)
    first, second = rows[0], rows[1]
    assert first.kept_bytes == pytest.approx(second.kept_bytes - second.recompute_saves_bytes, rel=1e-9)
    assert set(first.states) == {"replicated"} and first.device_state_bytes > 0 and first.host_bytes == 0


def test_each_block_counts_its_sharded_and_offloaded_weights(ctx):
    sharded, offloaded = registry.run(ctx, "fsdp"), registry.run(ctx, "fsdp", {"offload": True})
    by_state = {}
    for plan in (sharded, offloaded):
        rows = block_report.block_rows(plan, model_of(plan))
        by_state[plan.strategy[next(op for op, c in plan.strategy.items() if c.sharded_state)].state] = rows
    for shard_row, host_row in zip(by_state["sharded"], by_state["offloaded"]):
        assert set(shard_row.states) == {"sharded"} and host_row.states == {"offloaded": shard_row.states["sharded"]}
        assert host_row.device_state_bytes == 0
        assert host_row.host_bytes == pytest.approx(shard_row.device_state_bytes, rel=1e-12)
        assert host_row.gather_time_s > shard_row.gather_time_s > 0
    table = block_report.block_table(by_state["offloaded"])
    assert table.columns[0] == "block" and len(table.rows) == len(by_state["offloaded"])


def test_a_graph_without_blocks_has_no_rows():
    plan = registry.run(context(zoo.build("mlp-tiny"), "cpu-1x2", 2), "data-parallel")
    assert block_report.block_rows(plan, model_of(plan)) == []


def test_each_block_says_what_offloading_it_saves_and_costs_and_the_plans_choice(ctx):
    """The plan offloading its first block and recomputing its second: the rows say so; the
    blocks' offload savings and costs add up to what offloading every block frees and adds; an
    offloaded block keeps nothing of its own and holds its activations in host memory."""
    from dataclasses import replace as with_model
    from stratagem.search.context import make_plan
    names = tuple(b.name for b in blocks(ctx.graph))
    strategy = registry.run(ctx, "data-parallel").strategy
    plan = make_plan(with_model(ctx, model=ctx.model.with_activations(names[1:2], names[:1])), strategy, "dp")
    model = model_of(plan)
    assert (model.recompute, model.offload_activations) == (names[1:2], names[:1])
    rows = block_report.block_rows(plan, model)
    assert [(r.offloaded, r.recomputed) for r in rows[:3]] == [(True, False), (False, True), (False, False)]
    every, none = model.with_activations((), names), model.with_activations((), ())
    freed = none.memory_parts(strategy)["activations"][0] - every.memory_parts(strategy)["activations"][0]
    added = every.plan_cost(strategy).time_s - none.plan_cost(strategy).time_s
    across = sum(num_bytes for num_bytes, _, readers in credited_readers(none, strategy)      # RoPE's tables:
                 if len({block_of(model.graph.op(r).module) for r in readers}) > 1)       # in no block's row
    assert 0 < freed - sum(r.offload_saves_bytes for r in rows) < across
    assert sum(r.offload_costs_s for r in rows) == pytest.approx(added, rel=1e-9)
    assert all(r.offload_saves_bytes > r.recompute_saves_bytes > 0 for r in rows)     # inputs too
    first, third = rows[0], rows[2]
    assert first.kept_bytes == pytest.approx(third.kept_bytes - third.offload_saves_bytes, rel=1e-9)
    assert first.host_bytes > 0 and third.host_bytes == 0
    assert [row[2] for row in block_report.block_table(rows).rows[:3]] == ["offloaded", "recomputed", "kept"]
