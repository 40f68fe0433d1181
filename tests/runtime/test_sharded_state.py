"""Weights held sharded (cost.weight_state) train as one process does: plans whose weight owners
hold their weights, gradients and optimizer state sharded over the data-parallel axes, freed after
forward and gathered again for backward ("sharded") or kept until backward ("sharded_kept"), run on
2 and 4 gloo ranks give the losses, first-step gradients and parameters (after 3 Adam steps) of a
single-process run in float64, within the bounds of runtime.compare. "offloaded" (the shards in host
memory, which on CPU ranks is the device's: the same training, no memory saved) is planned on a
cluster whose file describes its hosts (a100), the only ones that price it, and run here alike. The plans mix sharded state
with operator splits (owt, tofu-like on a 2x2 mesh). On 2 ranks gradients are also clipped to a
global norm below theirs before each step (runtime.training.clip_grad_norm, across shards and
meshes), one plan with SGD, whose update shows a wrong clip scale undamped (Adam's normalization
would hide it). One torchrun launch per world size runs every plan."""

from __future__ import annotations


import pytest
import torch

from stratagem.frontend import zoo
from stratagem.runtime.errors import ExecutionError
from stratagem.runtime.execute import PlanModule
from stratagem.runtime.session import RunOptions, run_plans
from stratagem.search import registry
from stratagem.search.context import context, make_plan
from stratagem.search.strategies import with_sharded_state

from .plans import ARGS, BATCH

pytestmark = pytest.mark.numerics

CASES = {
    2: [("mlp-tiny", "data-parallel", "sharded"), ("mlp-tiny", "data-parallel", "sharded_kept"),
        ("mlp-tiny", "data-parallel", "offloaded"), ("gpt-tiny-tiny", "owt", "offloaded"),
        ("transformer-tiny", "owt", "sharded"), ("gpt-tiny-tiny", "data-parallel", "sharded"),
        ("lenet-tiny", "data-parallel", "sharded_kept"), ("rnnlm-2-tiny", "owt", "sharded"),
        ("gpt-tiny-tiny", "owt", "sharded", "sgd")],
    4: [("lenet-tiny", "tofu-like", "sharded_kept"), ("transformer-tiny", "tofu-like", "sharded"),
        ("transformer-tiny", "owt", "sharded_kept"), ("gpt-tiny-tiny", "owt", "sharded"),
        ("lenet-tiny", "data-parallel", "sharded"), ("transformer-tiny", "tofu-like", "offloaded")],
}
STEPS = 3
CLIP = {2: 0.05, 4: None}       # a global norm below the first steps' (tested below), or none


def sharded_plan(model: str, algorithm: str, state: str, devices: int, optimizer: str = "adam"):
    cluster = "a100-1x8" if state == "offloaded" else f"cpu-1x{devices}"
    ctx = context(zoo.build(model, batch_size=BATCH), cluster, devices, optimizer)
    base = registry.run(ctx, algorithm, ARGS.get(algorithm, {}))
    strategy = with_sharded_state(ctx, dict(base.strategy), state)
    return make_plan(ctx, strategy, f"{algorithm}+{state}")


@pytest.fixture(scope="module", params=sorted(CASES), ids=lambda n: f"{n}ranks")
def reports(request, tmp_path_factory):
    devices = request.param
    directory = tmp_path_factory.mktemp(f"sharded{devices}")
    plans, paths = {}, []
    for case in CASES[devices]:
        plan = sharded_plan(*case[:3], devices, *case[3:])
        path = directory / ("-".join(case) + ".json")
        plan.save(path)
        plans[case], paths = plan, paths + [path]
    found = run_plans(paths, RunOptions(steps=STEPS, check=True, timeout_s=120, out_dir=str(directory / "run"),
                                        max_grad_norm=CLIP[devices]))
    return devices, plans, dict(zip(CASES[devices], found))


def test_plans_with_sharded_weights_train_as_one_process_does(reports):
    devices, plans, by_case = reports
    failed = {"/".join(case): r["check"] for case, r in by_case.items() if not r["check"]["same_training"]}
    assert not failed, failed
    for report in by_case.values():
        assert report["world_size"] == devices and len(report["losses"]) == STEPS
        assert report["check"]["max_param_diff"] is not None and report["check"]["max_grad_diff"] is not None


def test_clipping_really_clips(reports):
    """The clip norm is below every plan's first-step gradient norm (reference run), so each step
    is scaled: the check above compares clipped training."""
    from stratagem.runtime.training import reference_run, training_spec
    devices, plans, _ = reports
    if CLIP[devices] is None:
        pytest.skip("no clipping at this rank count")
    for plan in plans.values():
        first = reference_run(training_spec(plan, dtype="float64"), 1).gradients
        norm = sum(float(g.double().norm()) ** 2 for g in first.values()) ** 0.5
        assert norm > 2 * CLIP[devices], (plan.model, norm)


def test_offloaded_weights_are_refused_on_gpu_ranks(reports):
    """The runtime runs "offloaded" on CPU ranks only; a GPU rank says so before building meshes."""
    _, plans, _ = reports
    plan = next(p for case, p in plans.items() if case[2] == "offloaded")
    with pytest.raises(ExecutionError, match="'offloaded' weight state on CPU ranks only"):
        PlanModule(plan, {}, device=torch.device("cuda"))


def test_the_plans_really_shard_weights(reports):
    """Guard against a vacuous check: every plan holds some weight sharded, and the sharded ones
    include ops split over two mesh axes at 4 ranks."""
    devices, plans, _ = reports
    for case, plan in plans.items():
        states = {c.state for c in plan.strategy.values()}
        assert case[2] in states, case
        assert plan.optimizer == (case[3] if len(case) > 3 else "adam")
    if devices == 4:
        assert any(len(c.mesh_shape) == 2 and c.sharded_state for plan in plans.values()
                   for c in plan.strategy.values())
