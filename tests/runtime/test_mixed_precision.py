"""Plans in bf16 mixed precision run as planned on 2 gloo ranks: bfloat16 compute, float32 master
weights (what the optimizer steps, sharded or not). Checked three ways: in float64 (`--check`) they
train as one process does (the plan's distribution is the same math; a bf16 comparison would have
no useful bound: its rounding bound, tdl.rounding, exceeds 1 on these graphs); run as planned, the
losses are bfloat16 values (the forward computed in bf16) and the parameters every rank holds are
the float32 bytes the cost model charges (MemTracker's parameters and buffers against the plan's)."""

from __future__ import annotations

import pytest
import torch

from stratagem.cost.opcost import held_itemsize
from stratagem.frontend import zoo
from stratagem.ir import Role, owned_parameters
from stratagem.report.replay import model_of
from stratagem.runtime.session import RunOptions, run_plans
from stratagem.search import registry
from stratagem.search.context import context

from .plans import BATCH

pytestmark = pytest.mark.numerics

CASES = [("gpt-tiny-tiny", "fsdp"), ("gpt-tiny-tiny", "owt"), ("transformer-tiny", "data-parallel"),
         ("mlp-tiny", "tofu-like")]
DEVICES, STEPS = 2, 3


def mixed_plan(model: str, algorithm: str):
    ctx = context(zoo.build(model, batch_size=BATCH), f"cpu-1x{DEVICES}", DEVICES, precision="bf16-mixed")
    return registry.run(ctx, algorithm, {})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mixed")
    plans, paths = {}, []
    for case in CASES:
        plans[case] = mixed_plan(*case)
        paths.append(directory / f"{'-'.join(case)}.json")
        plans[case].save(paths[-1])
    checked = run_plans(paths, RunOptions(steps=STEPS, check=True, timeout_s=120, out_dir=str(directory / "check")))
    plain = run_plans(paths, RunOptions(steps=STEPS, timeout_s=120, out_dir=str(directory / "run")))
    return plans, dict(zip(CASES, checked)), dict(zip(CASES, plain))


def test_mixed_precision_plans_train_as_one_process_does_in_float64(runs):
    plans, checked, _ = runs
    assert all(p.precision == "bf16-mixed" and p.graph.tensors[p.graph.outputs[0]].dtype == "bfloat16"
               for p in plans.values())
    failed = {case: r["check"] for case, r in checked.items() if not r["check"]["same_training"]}
    assert not failed, failed


def test_run_as_planned_the_forward_computes_in_bfloat16(runs):
    _, _, plain = runs
    for case, report in plain.items():
        losses = report["losses"]
        assert len(losses) == STEPS and all(torch.isfinite(torch.tensor(losses)))
        assert all(torch.tensor(x).to(torch.bfloat16).item() == x for x in losses), (case, losses)


def buffer_bytes(plan) -> float:
    """What the plan's weights count for buffers (held in float32 as the module keeps them), on
    the device the count is for: MemTracker counts parameters apart from the buffers the plan
    module holds unregistered."""
    model = model_of(plan)
    device = plan.details["memory_by_kind"]["device"]
    found = 0.0
    for op in plan.graph.ops:
        config = plan.strategy[op.name]
        for i in owned_parameters(plan.graph, op):
            spec = plan.graph.tensors[op.inputs[i]]
            if spec.role is Role.BUFFER and device in config.devices:
                found += model.input_layout(op.name, config, i).local_num_elements(spec.shape) * held_itemsize(model, spec)
    return found


def test_the_weights_are_held_in_float32_as_the_plan_charges(runs):
    plans, _, plain = runs
    sharded = 0
    for case, report in plain.items():
        predicted = plans[case].details["memory_by_kind"]["weights"] - buffer_bytes(plans[case])
        measured = [kinds["Parameter"] for kinds in report["peak_memory_by_kind"]]
        assert max(measured) == pytest.approx(predicted, rel=1e-9), case
        sharded += bool(plans[case].details.get("weight_states"))
    assert sharded >= 1
