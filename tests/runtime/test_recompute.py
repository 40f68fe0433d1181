"""Recomputed blocks (cost.recompute: torch.utils.checkpoint around each repeated block) train as
one process does on 2 gloo ranks, with operator splits, sharded weights and mixed precision
around them, and hold less memory than the same plan keeping its activations, as predicted."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stratagem.cost.recompute import blocks
from stratagem.frontend import zoo
from stratagem.runtime.session import RunOptions, run_plans
from stratagem.search import registry
from stratagem.search.context import context, make_plan, recomputing

from .plans import BATCH

pytestmark = pytest.mark.numerics

DEVICES, STEPS = 2, 3
CASES = [("gpt-tiny-tiny", "fsdp", "fp32"), ("transformer-tiny", "tofu-like", "fp32"),
         ("resnet-101-tiny", "data-parallel", "fp32"), ("gpt-tiny-tiny", "owt", "bf16-mixed")]
MEASURED = ("gpt-tiny", "data-parallel", "fp32")     # activations dominate: recomputation shows
FIRST_ONLY = CASES[3]     # recomputes its first block only (search.selective's choices), the others every block


def plan_pair(model: str, algorithm: str, precision: str, batch: int | None = BATCH, first: int | None = None):
    """The search's plan, and the same strategy with its first `first` blocks recomputed (None:
    every block; both simulated)."""
    ctx = context(zoo.build(model, batch_size=batch), f"cpu-1x{DEVICES}", DEVICES, precision=precision)
    plain = registry.run(ctx, algorithm, {})
    names = tuple(b.name for b in blocks(ctx.graph))[:first]
    return plain, make_plan(recomputing(ctx, names), plain.strategy, f"{algorithm}+recompute")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("recompute")
    plans, paths = {}, []
    for case in (*CASES, MEASURED):
        pair = plan_pair(*case, batch=None if case == MEASURED else BATCH, first=1 if case == FIRST_ONLY else None)
        for label, plan in zip(("plain", "recompute"), pair):
            plans[case, label] = plan
            paths.append(directory / f"{'-'.join(case)}-{label}.json")
            plan.save(paths[-1])
    checked = run_plans(paths[1:-2:2], RunOptions(steps=STEPS, check=True, timeout_s=120, out_dir=str(directory / "c")))
    measured = run_plans(paths[-2:], RunOptions(steps=2, timeout_s=120, out_dir=str(directory / "m")))
    return plans, dict(zip(CASES, checked)), dict(zip(("plain", "recompute"), measured))


def test_recomputed_plans_train_as_one_process_does(runs):
    plans, checked, _ = runs
    for case in CASES:
        names = tuple(b.name for b in blocks(plans[case, "plain"].graph))
        assert plans[case, "recompute"].recompute == (names[:1] if case == FIRST_ONLY else names)
        assert len(names) > 1
    failed = {case: r["check"] for case, r in checked.items() if not r["check"]["same_training"]}
    assert not failed, failed


def test_recomputation_trades_time_for_memory_in_the_cost_model(runs):
    plans, _, _ = runs
    for case in CASES:
        plain, recomputed = plans[case, "plain"], plans[case, "recompute"]
        assert recomputed.additive_time_s > plain.additive_time_s
        assert recomputed.details["memory_by_kind"]["activations"] < plain.details["memory_by_kind"]["activations"]


def test_recomputation_holds_less_memory_on_the_ranks(runs):
    """gpt-tiny on 2 ranks: the measured peak (MemTracker, a steady step) falls by at least the
    simulated peak's fall. (The additive activations by kind count a saved view of a tensor its
    producer keeps twice, attention's output read back through a reshape: FT's overcharge.)"""
    plans, _, measured = runs
    predicted = {label: plans[MEASURED, label].peak_memory_bytes for label in ("plain", "recompute")}
    held = {label: max(k["Total"] for k in measured[label]["peak_memory_by_kind"])
            for label in ("plain", "recompute")}
    assert held["plain"] - held["recompute"] >= predicted["plain"] - predicted["recompute"] > 0, (held, predicted)


def test_a_plan_file_keeps_its_recomputed_blocks(runs, tmp_path):
    from stratagem.plan import Plan
    plans, _, _ = runs
    plan = plans[CASES[0], "recompute"]
    plan.save(tmp_path / "p.json")
    loaded = Plan.load(tmp_path / "p.json")
    assert loaded.recompute == plan.recompute
    assert replace(loaded, details={}).recompute == plan.recompute
