"""Pipeline plans (runtime.pipeline: torch.distributed.pipelining around the op-by-op interpreter)
train as one process does on the global batch: gpt-tiny-tiny cut into 2 stages of 1 gloo rank
(GPipe and 1F1B, each with 2 and 4 micro-batches) and of 2 ranks (1F1B with 2 and 4, GPipe with 4),
and into 4 stages of 1 rank (1F1B with 2), give the losses, first-step gradients and parameters
(after 3 steps) of a single-process run of m times the graph's batch in float64, within the bounds
of runtime.compare. Inside the 2-rank stages: data parallelism, weights held sharded
("sharded"), and a reduction split whose partial sums cross the cut; the 4 stages, with fewer
micro-batches than stages, pass activations through a stage; one plan recomputes the first
stage's block only (search.pipeline's first answer to a stage over the memory cap). On 1-rank
stages gradients are clipped
to a global norm across the stages (one plan with SGD, which shows a wrong clip scale undamped).
Refused before anything launches: batch norm (it mixes the samples of a batch), dropout (its masks
would repeat in every micro-batch), and a cut between a tied weight's readers (when the plan is
loaded). A stage that hangs fails the run within its timeout and leaves no process behind. One
torchrun launch per world size runs every plan."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest

from stratagem.cost.recompute import blocks
from stratagem.errors import ConfigError
from stratagem.frontend import zoo
from stratagem.plan import Plan
from stratagem.runtime.errors import NotRunnable, RunFailed
from stratagem.runtime.launch import STARTUP_S
from stratagem.runtime.runnable import require_runnable
from stratagem.runtime.session import RunOptions, run_plans
from stratagem.runtime.stages import loss_weight, stages_of
from stratagem.runtime.worker import FAULT_ENV
from stratagem.search.context import context
from stratagem.search.strategies import data_parallel_strategy, with_sharded_state
from stratagem.space import Configuration, Pipeline, Strategy
from stratagem.space.pipeline import staged

pytestmark = pytest.mark.numerics

MODEL, GLOBAL_BATCH, STEPS, TIMEOUT_S = "gpt-tiny-tiny", 8, 3, 60.0
CLIP = 0.5             # below the first steps' global gradient norm: clipping acts
# name: (micro-batches, stages, ranks per stage, schedule, inside a stage, optimizer)
CASES = {
    2: {"2x1-gpipe-m2": (2, 2, 1, "gpipe", "data", "adam"), "2x1-gpipe-m4": (4, 2, 1, "gpipe", "data", "adam"),
        "2x1-1f1b-m2": (2, 2, 1, "1f1b", "data", "adam"), "2x1-1f1b-m4-sgd": (4, 2, 1, "1f1b", "data", "sgd"),
        "2x1-1f1b-m2-recompute-stage0": (2, 2, 1, "1f1b", "recompute-first", "adam")},
    4: {"2x2-1f1b-m2-partial-cut": (2, 2, 2, "1f1b", "partial", "adam"),
        "2x2-gpipe-m4": (4, 2, 2, "gpipe", "data", "adam"),
        "2x2-1f1b-m4-sharded": (4, 2, 2, "1f1b", "sharded", "adam"),
        "4x1-1f1b-m2": (2, 4, 1, "1f1b", "data", "adam")},
}


def pipeline_plan(m: int, stages: int, d: int, schedule: str, inside: str = "data", optimizer: str = "adam",
                  model: str = MODEL) -> Plan:
    """The stages' ops under one strategy for d devices, moved onto their blocks (space.pipeline)."""
    graph = zoo.build(model, batch_size=GLOBAL_BATCH // m)
    ctx = context(graph, f"cpu-1x{stages * d}", d)
    per_stage = data_parallel_strategy(ctx)
    cuts = _cuts(graph, stages, after_add=inside == "partial")
    if inside == "sharded":
        per_stage = with_sharded_state(ctx, per_stage, "sharded")
    if inside == "partial":          # the MLP's down projection split over its reduction dim, cut after it
        add = graph.op(cuts[0])
        down = graph.producer[add.inputs[1]]
        assert (add.kind, down.kind) == ("add", "linear")
        per_stage = {**per_stage, down.name: Configuration.of(k=d)}
    pipe = Pipeline(cuts, m, schedule)
    recompute = (blocks(graph)[0].name,) if inside == "recompute-first" else ()   # the first stage's block only
    return Plan(graph, f"cpu-1x{stages * d}", stages * d, Strategy(staged(graph, pipe, stages * d, per_stage),
                pipeline=pipe), algorithm=f"pipeline-{inside}", optimizer=optimizer, model=model,
                recompute=recompute)


def _cuts(graph, stages: int, after_add: bool = False) -> tuple[str, ...]:
    """2 stages: at the second block, or (`after_add`) at the first block's last op, its residual
    add (inputs: the attention's residual, the MLP's down projection); more: evenly over the
    blocks' ops."""
    found = blocks(graph)
    if stages == 2:
        return (found[0].ops[-1],) if after_add else (found[1].ops[0],)
    ops = [op for b in found for op in b.ops]
    return tuple(ops[len(ops) * k // stages] for k in range(1, stages))


def _left_behind(out: Path) -> list[str]:
    """Processes whose command line names the run's job file."""
    job = str(out / "job.json").encode()
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if job in cmdline.read_bytes():
                found.append(cmdline.parent.name)
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pipeline")
    reports = {}
    for devices, cases in CASES.items():
        paths = []
        for name, case in cases.items():
            paths.append(directory / f"{name}.json")
            pipeline_plan(*case).save(paths[-1])
        options = RunOptions(steps=STEPS, check=True, timeout_s=TIMEOUT_S, out_dir=str(directory / str(devices)),
                             max_grad_norm=CLIP if devices == 2 else None)
        reports.update(zip(cases, run_plans(paths, options)))
        assert not _left_behind(directory / str(devices))
    return reports


@pytest.mark.parametrize("name", [n for cases in CASES.values() for n in cases])
def test_pipeline_plans_train_as_one_process_does(runs, name):
    check = runs[name]["check"]
    assert check["same_training"], check
    assert runs[name]["losses"] == pytest.approx(check["reference_losses"], rel=1e-12)


def test_each_rank_holds_its_stage_only_and_reports_its_memory(runs):
    """Every rank reports its peak; a 1-rank stage's parameters are its own, fewer than the model's."""
    whole = zoo.build(MODEL, batch_size=GLOBAL_BATCH).parameter_bytes * 2      # float64
    report = runs["2x1-1f1b-m2"]
    assert len(report["peak_memory_bytes"]) == 2 and all(p > 0 for p in report["peak_memory_bytes"])
    held = [kinds["Parameter"] for kinds in report["peak_memory_by_kind"]]
    assert all(0 < h < whole for h in held) and sum(held) == whole


def test_stages_are_plans_for_their_own_devices():
    """4 stages: each stage's configurations lie on devices 0..d-1; what a stage receives it reads
    or sends on (the rotary tables made in stage 0 travel to every block); the loss is 1/m each."""
    plan = pipeline_plan(2, 4, 1, "1f1b")
    stages = stages_of(plan)
    assert [s.plan.num_devices for s in stages] == [1] * 4
    assert all(c.devices == range(1) for s in stages for c in s.plan.strategy.values())
    held = [w.name for s in stages for w in s.plan.graph.weights]
    assert sorted(held) == sorted(w.name for w in plan.graph.weights)        # each weight in one stage
    assert stages[-1].sent == plan.graph.outputs and stages[0].received == ()
    assert all(a.sent == b.received for a, b in pairwise(stages))
    assert stages[0].inputs == ("tokens",) and stages[-1].inputs == ("targets",)
    passed = [t for s in stages[1:-1] for t in s.received if t in s.sent]
    assert passed, "some activation passes through a middle stage"
    assert loss_weight(plan) == 0.5


def test_batch_norm_is_refused_before_anything_launches(tmp_path):
    plan = pipeline_plan(2, 2, 1, "1f1b", model="resnet-101-tiny")
    plan.save(tmp_path / "bn.json")
    with pytest.raises(NotRunnable, match=r"batch_norm_stats\) mixes the samples of a batch.*expected ops that "
                                          r"compute each sample from that sample alone.*Nothing was launched"):
        run_plans([tmp_path / "bn.json"], RunOptions(steps=1, check=True, timeout_s=TIMEOUT_S,
                                                     out_dir=str(tmp_path / "out")))
    assert not (tmp_path / "out" / "job.json").exists()


def test_dropout_is_refused_before_anything_launches(tmp_path):
    """Masks drawn at each element's position in the micro-batch would repeat in every micro-batch."""
    data = pipeline_plan(2, 2, 1, "gpipe").to_dict()
    for op in data["graph"]["ops"]:
        if op["kind"] == "scaled_dot_product_attention":
            op["attrs"].update(dropout_p=0.1, seed=7)
    (tmp_path / "dropout.json").write_text(json.dumps(data))
    with pytest.raises(NotRunnable, match=r"drops out with p = 0.1.*every micro-batch would draw the first one's"):
        run_plans([tmp_path / "dropout.json"], RunOptions(steps=1, timeout_s=TIMEOUT_S, out_dir=str(tmp_path / "out")))
    assert not (tmp_path / "out" / "job.json").exists()


def test_a_cut_between_tied_weights_is_refused(tmp_path):
    """gpt-125m-tiny ties its embedding to its head: no cut keeps them in one stage. Loading the
    plan refuses it; so does the runtime given the plan itself."""
    graph = zoo.build("gpt-125m-tiny", batch_size=4)
    pipe = Pipeline((blocks(graph)[1].ops[0],), 2, "gpipe")
    per_stage = data_parallel_strategy(context(graph, "cpu-1x2", 1))
    plan = Plan(graph, "cpu-1x2", 2, Strategy(staged(graph, pipe, 2, per_stage), pipeline=pipe),
                algorithm="pipeline-data", model="gpt-125m-tiny")
    plan.save(tmp_path / "tied.json")
    tied = r"weight 'tok_embeddings.weight' is read in stages 0 and 1.*a tied weight keeps its readers in one stage"
    with pytest.raises(ConfigError, match=r"field 'strategy.pipeline': " + tied):
        run_plans([tmp_path / "tied.json"], RunOptions(steps=1, timeout_s=TIMEOUT_S, out_dir=str(tmp_path / "out")))
    with pytest.raises(ConfigError, match=tied):
        require_runnable(plan)
    assert not (tmp_path / "out" / "job.json").exists()


def test_a_stage_that_hangs_fails_the_run_within_its_timeout(tmp_path):
    """Stage 1 hangs in step 1 while stage 0 waits on its gradients (a point-to-point receive):
    gloo's timeout ends the wait, the run fails naming the wait, and nothing of it is left running."""
    plan = pipeline_plan(2, 2, 1, "1f1b")
    plan.save(tmp_path / "p.json")
    timeout_s = 6.0
    begin = time.monotonic()
    with pytest.raises(RunFailed, match=r"rank 0 failed in task 'plan0' at step 1: .*Timed out waiting"):
        run_plans([tmp_path / "p.json"], RunOptions(steps=3, timeout_s=timeout_s, env={FAULT_ENV: "1:1:hang"},
                                                    out_dir=str(tmp_path / "out")))
    assert time.monotonic() - begin < timeout_s + STARTUP_S
    assert not _left_behind(tmp_path / "out")


def test_a_pipeline_plan_file_keeps_its_stages(tmp_path):
    plan = pipeline_plan(4, 2, 2, "gpipe")
    plan.save(tmp_path / "p.json")
    loaded = Plan.load(tmp_path / "p.json")
    assert loaded.strategy.pipeline == plan.strategy.pipeline
    assert replace(loaded, details={}).strategy == plan.strategy
