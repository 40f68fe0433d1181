"""The practitioners' LLM setting (search.baselines.fsdp_tp: Megatron tensor parallelism with
sequence parallelism over the inner mesh axis, FSDP over the outer, every block recomputed) trains as one process does on 4
gloo ranks (2 x 2), in fp32 and in bf16 mixed precision (checked in float64)."""

from __future__ import annotations

import pytest

from stratagem.frontend import zoo
from stratagem.runtime.session import RunOptions, run_plans
from stratagem.search import registry
from stratagem.search.context import context

from stratagem.cost.recompute import blocks

from .plans import BATCH, reduce_scatters

pytestmark = pytest.mark.numerics

CASES = [("gpt-tiny-tiny", "fp32"), ("transformer-tiny", "fp32"), ("gpt-tiny-tiny", "bf16-mixed")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("practitioners")
    plans, contexts, paths = {}, {}, []
    for model, precision in CASES:
        ctx = context(zoo.build(model, batch_size=BATCH), "cpu-1x4", 4, precision=precision)
        plans[model, precision] = registry.run(ctx, "fsdp-tp", {"tensor": 2})
        contexts[model, precision] = ctx
        paths.append(directory / f"{model}-{precision}.json")
        plans[model, precision].save(paths[-1])
    found = run_plans(paths, RunOptions(steps=3, check=True, timeout_s=120, out_dir=str(directory / "run")))
    return plans, dict(zip(CASES, found)), contexts


def test_fsdp_with_tensor_parallelism_trains_as_one_process_does(runs):
    _, reports, _ = runs
    failed = {case: r["check"] for case, r in reports.items() if not r["check"]["same_training"]}
    assert not failed, failed


def test_the_plans_are_two_dimensional_sharded_and_recomputed(runs):
    plans, _, contexts = runs
    for case, plan in plans.items():
        configs = list(plan.strategy.values())
        assert plan.recompute and any(c.sharded_state for c in configs)
        kinds = {c.levels[1].dim for c in configs if len(c.levels) == 2 and c.levels[1].dim}
        assert "j" in kinds and "k" in kinds                   # column- and row-parallel linears
        # sequence parallel: each row-parallel linear's partial sum (attention's and the MLP's)
        assert reduce_scatters(contexts[case], plan.strategy) >= 2 * len(blocks(plan.graph))
