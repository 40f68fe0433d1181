"""Checkpoint under plan A on 4 ranks, resume under plan B (another strategy) on 2 ranks: the loss
curve and the final parameters are those of an uninterrupted single-process run (TensorOpt §4,
adapting to the resources available). Optimizer state (Adam's moments and step) travels too: a
resume without it would take different steps."""

from __future__ import annotations

import pytest
import torch

from stratagem.runtime.compare import compare
from stratagem.runtime.launch import LaunchOptions, launch
from stratagem.runtime.training import reference_run, training_spec

from .plans import plan, saved

pytestmark = pytest.mark.numerics     # run under every kernel path by scripts/numerics_variants.sh

MODEL, BEFORE, AFTER = "transformer-tiny", 2, 2


def test_resume_under_another_plan_on_fewer_ranks_continues_the_same_training(tmp_path):
    path_a, path_b = saved(tmp_path, MODEL, "tofu-like", 4), saved(tmp_path, MODEL, "owt", 2)
    assert plan(MODEL, "tofu-like", 4).strategy != plan(MODEL, "owt", 2).strategy
    ckpt = tmp_path / "ckpt"
    first = launch([{"name": "a", "plan": str(path_a), "steps": BEFORE, "save_checkpoint": str(ckpt),
                     "dtype": "float64"}],
                   LaunchOptions(4, timeout_s=120), tmp_path / "run-a").results["a"]
    second = launch([{"name": "b", "plan": str(path_b), "steps": AFTER, "load_checkpoint": str(ckpt),
                      "save_params": True, "dtype": "float64"}],
                    LaunchOptions(2, timeout_s=120), tmp_path / "run-b").results["b"]
    reference = reference_run(training_spec(plan(MODEL, "owt", 2), dtype="float64"), BEFORE + AFTER)
    params = torch.load(tmp_path / "run-b" / "b.params.pt")
    result = compare(plan(MODEL, "owt", 2).graph, first["losses"] + second["losses"], reference, params=params)
    assert result.same_training, result
    assert reference.losses[BEFORE] != reference.losses[0]
