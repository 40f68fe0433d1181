"""Attention with dropout, end to end: the TDL's mask is a function of each attention weight's global
position, so a plan that splits attention over heads and batch on 2 gloo ranks trains exactly as the
1-rank plan of the same graph does (losses after 3 Adam steps, in float64, within the bounds of
runtime.compare with the 1-rank run's first-step gradients as the magnitudes), and differently from
no dropout.

The zoo's tiny Transformer has p = 0 (so the same-training test can compare with torch's own
dropout); here its plans' attention ops are given dropout_p and a seed in the plan file, which is
what capture writes for a module whose attention has dropout (tests/frontend/test_aten_map)."""

from __future__ import annotations

import json

import pytest
import torch

from stratagem.plan import Plan
from stratagem.runtime.compare import tolerance
from stratagem.runtime.launch import LaunchOptions, launch
from stratagem.space.runnable import adapter_of
from stratagem.tdl.graphops import AnalysisCache

from .plans import saved

pytestmark = pytest.mark.numerics     # run under every kernel path by scripts/numerics_variants.sh

STEPS, LR = 3, 1e-3


def _with_dropout(path, out, p: float = 0.3):
    data = json.loads(path.read_text())
    for i, op in enumerate(o for o in data["graph"]["ops"] if o["kind"] == "scaled_dot_product_attention"):
        op["attrs"].update(dropout_p=p, seed=100 + i)
    out.write_text(json.dumps(data))
    return out


def _losses(paths, nproc, directory, save_params=False):
    tasks = [{"name": f"t{i}", "plan": str(p), "steps": STEPS, "lr": LR, "seed": 0, "dtype": "float64",
              "save_params": save_params} for i, p in enumerate(paths)]
    result = launch(tasks, LaunchOptions(nproc, timeout_s=120), directory)
    return [result.results[t["name"]]["losses"] for t in tasks]


def _loss_bounds(plan, losses, gradients_path) -> list[float]:
    gradients = torch.load(gradients_path).values()
    tol = tolerance(plan.graph, "float64", plan.optimizer, LR, max(g.abs().max().item() for g in gradients))
    l1 = sum(g.abs().sum().item() for g in gradients)
    return [tol.loss_rtol(k, loss, l1) * abs(loss) for k, loss in enumerate(losses)]


def test_split_attention_with_dropout_trains_as_one_rank_does(tmp_path):
    split = saved(tmp_path, "transformer-tiny", "tofu-like", 2)
    whole = saved(tmp_path, "transformer-tiny", "data-parallel", 1)
    split_dropped = _with_dropout(split, tmp_path / "split-dropout.json")
    whole_dropped = _with_dropout(whole, tmp_path / "whole-dropout.json")
    plan = Plan.load(split_dropped)
    analyses = AnalysisCache(plan.graph)
    adapted = [op.name for op in plan.graph.ops if op.kind == "scaled_dot_product_attention"
               and adapter_of(analyses[op.name], plan.strategy[op.name]) == "attention_positions"]
    assert adapted, "the 2-rank plan should split some attention op over batch or heads"
    (two_ranks, plain), (one_rank,) = (_losses([split_dropped, split], 2, tmp_path / "two"),
                                       _losses([whole_dropped], 1, tmp_path / "one", save_params=True))
    bounds = _loss_bounds(plan, one_rank, tmp_path / "one" / "t0.gradients.pt")
    assert all(abs(a - b) <= bound for a, b, bound in zip(two_ranks, one_rank, bounds)), (two_ranks, one_rank, bounds)
    assert abs(two_ranks[0] - plain[0]) > 100 * bounds[0]
