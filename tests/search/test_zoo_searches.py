"""Every search on the zoo's small variants: each returns a plan, and MCMC never does worse than
its data-parallel start; exhaustive refuses what it cannot finish, with a clear error."""

from __future__ import annotations

import pytest

from stratagem import zoo
from stratagem.search.exhaustive import ExhaustiveTooLarge
from stratagem.search.planner import search

MODELS = ("alexnet-tiny", "resnet-101-tiny", "rnntc-tiny", "nmt-tiny", "rnn-10-8k-tiny")


@pytest.mark.parametrize("name", MODELS)
def test_mcmc_and_tofu_plan_every_model(name):
    graph = zoo.build(name)
    dp = search(graph, "p100-4x4", algorithm="data-parallel", devices=4)
    mcmc = search(graph, "p100-4x4", algorithm="mcmc", devices=4, budget_s=None, max_proposals=10, seed=0)
    assert mcmc.iteration_time_s <= dp.iteration_time_s * (1 + 1e-12)
    tofu = search(graph, "p100-4x4", algorithm="tofu", devices=4)
    assert tofu.details["tofu_bytes"] >= 0 and tofu.iteration_time_s > 0
    assert all(c.num_devices == 4 for c in tofu.strategy.values())      # Tofu splits across all


def test_exhaustive_refuses_a_large_model_quickly():
    with pytest.raises(ExhaustiveTooLarge, match="use algorithm='mcmc'"):
        search(zoo.build("rnntc-tiny"), "p100-4x4", algorithm="exhaustive", devices=4, max_time_s=4.0,
               incumbent_proposals=5)
