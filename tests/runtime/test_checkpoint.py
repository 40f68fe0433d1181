"""Checkpoint under plan A on 4 ranks, resume under plan B (another strategy) on 2 ranks: the loss
curve and the final parameters are those of an uninterrupted single-process run (TensorOpt §4,
adapting to the resources available). Optimizer state (Adam's moments and step) travels too: a
resume without it would take different steps."""

from __future__ import annotations

import dataclasses
import shutil

import pytest
import torch

from stratagem.errors import ConfigError
from stratagem.plan import Plan
from stratagem.runtime import checkpoint
from stratagem.runtime.checkpoint import CheckpointError
from stratagem.runtime.compare import compare
from stratagem.runtime.launch import LaunchOptions, launch
from stratagem.runtime.session import RunOptions, run_plans
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


# ---- stratagem run --checkpoint-dir / --resume ----------------------------------------------

@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    """mlp-tiny on 2 ranks: 3 steps saved to a checkpoint, then 2 more resumed from it, and an
    uninterrupted run of 5 steps."""
    directory = tmp_path_factory.mktemp("resume")
    path = saved(directory, "mlp-tiny", "data-parallel", 2)
    ckpt = directory / "ckpt"
    first = run_plans([path], RunOptions(steps=3, checkpoint_dir=str(ckpt), timeout_s=120))[0]
    resumed = run_plans([path], RunOptions(steps=2, resume=str(ckpt), timeout_s=120))[0]
    whole = run_plans([path], RunOptions(steps=5, timeout_s=120))[0]
    return path, ckpt, first, resumed, whole


def test_a_resumed_run_continues_the_saved_one(saved_run):
    _, _, first, resumed, whole = saved_run
    assert first["losses"] + resumed["losses"] == whole["losses"]


def test_a_checkpoint_is_checked_before_anything_launches(saved_run, tmp_path):
    path, ckpt, *_ = saved_run
    assert checkpoint.check(ckpt, Plan.load(path)) == 3
    with pytest.raises(CheckpointError, match="no checkpoint at .*no such directory"):
        run_plans([path], RunOptions(steps=1, resume=str(tmp_path / "absent")))
    partial = tmp_path / "partial"
    shutil.copytree(ckpt, partial)
    data = next(partial.glob("*.distcp"))
    data.unlink()
    with pytest.raises(CheckpointError, match=f"is partial: expected its data file {data.name}"):
        run_plans([path], RunOptions(steps=1, resume=str(partial)))


def test_a_checkpoint_of_another_model_or_optimizer_is_refused_naming_what_differs(saved_run, tmp_path):
    path, ckpt, *_ = saved_run
    other = saved(tmp_path, "lenet-tiny", "data-parallel", 2)
    with pytest.raises(CheckpointError, match="does not fit the plan: expected weight"):
        checkpoint.check(ckpt, Plan.load(other))
    momentum = dataclasses.replace(Plan.load(path), optimizer="momentum")
    with pytest.raises(CheckpointError, match="another optimizer's state: expected momentum's"):
        checkpoint.check(ckpt, momentum)


def test_resume_with_check_is_refused():
    with pytest.raises(ConfigError, match="--check or --resume"):
        RunOptions(check=True, resume="somewhere")
