"""Partial sums reduce-scattered into split followers (search.coarsen rule 1's scattering variant,
Megatron-LM's sequence parallelism after a row-parallel matmul) train as one process does on 2
gloo ranks: the elementwise ops after each row-parallel linear of fsdp-tp's plan without sequence
parallelism, derived again as FT's groups derive them when they scatter, split instead of
replicating (fsdp-tp's own sequence parallelism: test_practitioners)."""

from __future__ import annotations

import pytest

from stratagem.cost.recompute import blocks
from stratagem.frontend import zoo
from stratagem.runtime.session import RunOptions, run_plans
from stratagem.search import registry
from stratagem.search.coarsen import coarsen
from stratagem.search.context import context, make_plan
from stratagem.search.space import member_configs

from .plans import BATCH, reduce_scatters

pytestmark = pytest.mark.numerics

DEVICES, STEPS = 2, 3


def scattered(ctx, plan):
    """`plan`'s strategy with every group's followers derived again, partial sums scattered."""
    strategy = dict(plan.strategy)
    for group in coarsen(ctx.graph, ctx.model.analyses):
        anchor = plan.strategy[group.anchor]
        for name, (config,) in member_configs(ctx.model, group, [anchor.base], scatter=True).items():
            if name != group.anchor:
                strategy[name] = config.with_state(plan.strategy[name].state)
    return strategy


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    directory = tmp_path_factory.mktemp("scatter")
    ctx = context(zoo.build("gpt-tiny-tiny", batch_size=BATCH), f"cpu-1x{DEVICES}", DEVICES)
    plain = registry.run(ctx, "fsdp-tp", {"sequence_parallel": False})
    plan = make_plan(ctx, scattered(ctx, plain), "fsdp-tp+scatter")
    path = directory / "scattered.json"
    plan.save(path)
    (report,) = run_plans([path], RunOptions(steps=STEPS, check=True, timeout_s=120, out_dir=str(directory / "c")))
    return ctx, plain, plan, report


def test_the_scattered_plan_trains_as_one_process_does(run):
    _, _, _, report = run
    assert report["check"]["same_training"], report["check"]
    assert report["world_size"] == DEVICES and len(report["losses"]) == STEPS


def test_the_plan_reduce_scatters_where_the_practitioners_all_reduce(run):
    """Guard against a vacuous check: fsdp-tp's plan without sequence parallelism moves no partial
    sum by reduce-scatter, the scattered one does on each row-parallel linear's output (attention's
    and the MLP's, per block)."""
    ctx, plain, plan, _ = run
    assert reduce_scatters(ctx, plain.strategy) == 0
    assert reduce_scatters(ctx, plan.strategy) >= 2 * len(blocks(ctx.graph))
