"""Offloaded blocks (cost.activation_offload: a block's saved activations in host memory until
backward; runtime.activation_offload's saved-tensor hooks) train as one process does on 2 gloo
ranks, with sharded weights gathered again in backward, operator splits, mixed precision and a
recomputed block beside them. On CPU ranks the copies are real but save nothing: the training is
what is checked. The hooks themselves are tested in this process: activations are copied (and the
copies are what backward reads), weights are not, gathered weights are noted and gathered again."""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import replace
from functools import cache

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.testing._internal.distributed.fake_pg import FakeStore

from stratagem.cost.activation_offload import with_offload
from stratagem.cost.recompute import blocks
from stratagem.errors import ConfigError
from stratagem.frontend import zoo
from stratagem.ir import Role
from stratagem.runtime.activation_offload import HostCopy, offloaded, to_host
from stratagem.runtime.execute import PlanModule, module_weights, offloaded_ops
from stratagem.runtime.regather import gathered_weights
from stratagem.runtime.session import RunOptions, run_plans
from stratagem.runtime.stages import stages_of
from stratagem.runtime.training import batch, build_module, training_spec
from stratagem.search import registry
from stratagem.search.context import context, make_plan, offloading

from .plans import BATCH

pytestmark = pytest.mark.numerics

DEVICES, STEPS = 2, 3
CLUSTER = "a100-1x8"          # its file has a host section: offload is priced there (cpu-1xN: none)
EVERY, FIRST_OFFLOADED_SECOND_RECOMPUTED = "every", "first offloaded, second recomputed"
CASES = [("gpt-tiny-tiny", "fsdp", "fp32", EVERY),
         ("gpt-tiny-tiny", "owt", "bf16-mixed", FIRST_OFFLOADED_SECOND_RECOMPUTED),
         ("transformer-tiny", "tofu-like", "fp32", EVERY)]
STAGED = "2 stages, every block offloaded"


@cache
def offload_plan(model: str, algorithm: str, precision: str, which: str, devices: int = DEVICES):
    """The search's plan with its blocks offloaded as `which` says (simulated), and the plain one."""
    ctx = context(zoo.build(model, batch_size=BATCH), CLUSTER, devices, precision=precision)
    plain = registry.run(ctx, algorithm, {})
    if which == EVERY:
        chosen = offloading(ctx, None)
    else:
        first, second = (b.name for b in blocks(ctx.graph)[:2])
        chosen = replace(ctx, model=ctx.model.with_activations((second,), (first,)))
    return plain, make_plan(chosen, plain.strategy, f"{algorithm}+offload")


# ---- the hooks, in this process ---------------------------------------------------------------

def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _linear_relu(x, w):
    return F.relu(F.linear(x, w)).sum()          # sum saves nothing


def test_activations_go_to_the_host_and_weights_stay():
    """linear saves x and w, relu its output: x and the output are copied (their bytes counted),
    w is not; the gradients are the ones computed without hooks, from the copies: zeroing x's data
    after forward changes nothing backward reads (it would without the copy)."""
    torch.manual_seed(0)
    x0, w0 = torch.randn(3, 5), torch.randn(7, 5)          # 60, 140 bytes; the relu's output 84
    expected = [t.grad for t in _grads(x0, w0, hooks=None)]
    copies: list[int] = []
    x, w = _grads(x0, w0, hooks=lambda w: offloaded([w], copies.append), spoil=True)
    assert sorted(copies) == [_nbytes(x0), 3 * 7 * 4]
    assert torch.equal(x.grad, expected[0]) and torch.equal(w.grad, expected[1])


def _grads(x0, w0, hooks, spoil: bool = False):
    """x and w (leaves) after backward of _linear_relu, forward under `hooks(w)`; `spoil`: x's data
    zeroed between forward and backward (behind autograd's back)."""
    x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
    if hooks is None:
        loss = _linear_relu(x, w)
    else:
        with hooks(w):
            loss = _linear_relu(x, w)
    if spoil:
        x.data.zero_()
    loss.backward()
    return x, w


def test_without_the_hooks_the_spoiled_input_changes_the_gradient():
    """The check above can fail: autograd's own saved x is the spoiled one."""
    torch.manual_seed(0)
    x0, w0 = torch.randn(3, 5), torch.randn(7, 5)
    clean = _grads(x0, w0, hooks=None)[1].grad
    spoiled = _grads(x0, w0, hooks=None, spoil=True)[1].grad
    assert not torch.equal(clean, spoiled)


def test_a_gathered_weight_is_noted_and_gathered_again_not_copied():
    """With the regather notes composed in (the "sharded" state): the gathered weight the kernel
    saves is gathered again in backward, once, and only the activations are copied."""
    torch.manual_seed(0)
    x0, w0 = torch.randn(3, 5), torch.randn(7, 5)
    expected = [t.grad for t in _grads(x0, w0, hooks=None)]
    x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
    regathered, copies = [], []

    def regather(position: int) -> torch.Tensor:
        regathered.append(position)
        return w.detach().clone()

    gathered = w * 1.0                                     # the step's gathered copy of the weight
    notes = gathered_weights({1: gathered}, regather)
    with offloaded([gathered], copies.append, notes):
        loss = _linear_relu(x, gathered)
    gathered.data.zero_()                                  # freed after forward: never read again
    loss.backward()
    assert regathered == [1]
    assert sorted(copies) == [_nbytes(x0), 3 * 7 * 4]
    assert torch.equal(x.grad, expected[0]) and torch.equal(w.grad, expected[1])


def test_a_host_copy_is_a_new_tensor():
    t = torch.arange(6.0).reshape(2, 3).t()                # a view, not contiguous
    copy = to_host(t)
    assert isinstance(copy, HostCopy) and not copy.pinned and copy.device == t.device
    assert copy.tensor.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
    assert torch.equal(copy.tensor, t)


# ---- PlanModule on one rank, in this process -------------------------------------------------

@contextmanager
def _world(backend: str, size: int, store):
    """A world of `size` ranks, this process rank 0, for the test's time."""
    dist.init_process_group(backend, store=store, rank=0, world_size=size)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def one_rank():
    """gpt-tiny-tiny's data-parallel plan for one device, and it with every block and with its
    first block offloaded."""
    ctx = context(zoo.build("gpt-tiny-tiny", batch_size=BATCH), CLUSTER, 1)
    plain = registry.run(ctx, "data-parallel", {})
    names = tuple(b.name for b in blocks(ctx.graph))
    return plain, {which: make_plan(offloading(ctx, which), plain.strategy, "dp+offload")
                   for which in (names, names[:1])}


def _module(plan):
    spec = training_spec(plan)
    return PlanModule(plan, module_weights(build_module(spec), plan.graph)), batch(spec, 0)


def _trained(plan):
    """The plan's PlanModule after one forward and backward on one rank, the loss, the gradients."""
    with _world("gloo", 1, dist.HashStore()):
        module, inputs = _module(plan)
        loss = module(*inputs)
        loss.backward()
        return module, loss.detach(), {n: p.grad.full_tensor() for n, p in module.named_parameters()}


def test_a_plan_module_offloads_its_blocks_activations(one_rank):
    """Same loss and gradients, bit for bit, as the plan keeping its activations; the bytes sent are
    none without offload, at least what the cost model says the blocks' ops save, and for one of
    two like blocks half of every block's."""
    plain, plans = one_rank
    module, loss, grads = _trained(plain)
    assert module.offloaded_bytes == 0
    sent = {}
    for names, plan in plans.items():
        offloading_module, offloading_loss, offloading_grads = _trained(plan)
        assert torch.equal(offloading_loss, loss)
        assert all(torch.equal(offloading_grads[n], g) for n, g in grads.items())
        sent[names] = offloading_module.offloaded_bytes
    every, first = sorted(plans, key=len, reverse=True)
    assert sent[every] == 2 * sent[first] > 0
    assert sent[every] >= _priced_bytes(plans[every])


def test_offloaded_bytes_count_the_last_forward_only(one_rank):
    _, plans = one_rank
    with _world("gloo", 1, dist.HashStore()):
        module, inputs = _module(next(iter(plans.values())))
        module(*inputs)
        once = module.offloaded_bytes
        module(*inputs)
    assert module.offloaded_bytes == once > 0


def test_sharded_weights_are_gathered_again_in_offloaded_blocks():
    """fsdp's weights ("sharded": freed after forward) are gathered again in backward as often with
    every block offloaded as without: the offload hooks keep the regather notes (rank 0 of a fake
    world of 2: the collectives move nothing, the calls are what is counted)."""
    plain, plan = offload_plan(*CASES[0])
    counted = {}
    for label, each in (("plain", plain), ("offload", plan)):
        with _world("fake", DEVICES, FakeStore()):
            module, inputs = _module(each)
            calls = []
            module._regather = _counting(module._regather, calls)
            module(*inputs).backward()
        counted[label] = (len(calls), module.offloaded_bytes)
    assert counted["offload"][0] == counted["plain"][0] > 0
    assert counted["offload"][1] > counted["plain"][1] == 0


def _counting(regather, calls: list):
    def counted(step, position):
        calls.append((step.op.name, position))
        return regather(step, position)
    return counted


def _priced_bytes(plan) -> int:
    """What the cost model says the offloaded ops send: each op's saved activations."""
    graph = with_offload(plan.graph, plan.offload_activations)
    sizes = {"float32": 4, "bfloat16": 2, "int64": 8}
    return sum(math.prod(graph.tensors[t].shape) * sizes[str(graph.tensors[t].dtype)]
               for saved in graph.meta["offload_saved"].values() for t in saved)


def test_a_block_both_recomputed_and_offloaded_is_refused(one_rank):
    _, plans = one_rank
    plan = max(plans.values(), key=lambda p: len(p.offload_activations))
    both = replace(plan, recompute=plan.offload_activations[:1])
    with pytest.raises(ConfigError, match="both recomputed and offloaded"):
        offloaded_ops(both)


def staged_offload_plan():
    """test_pipeline's 2 stages of one device, 2 micro-batches under 1F1B, every block offloaded
    (the planner prices no such plan yet; the runtime runs each stage's blocks as a plan's)."""
    from .test_pipeline import pipeline_plan
    plan = pipeline_plan(2, 2, 1, "1f1b")
    return replace(plan, offload_activations=tuple(b.name for b in blocks(plan.graph)))


def test_pipeline_stages_offload_the_blocks_they_hold():
    plan = staged_offload_plan()
    names = plan.offload_activations
    stages = stages_of(plan)
    held = [tuple(b.name for b in blocks(s.plan.graph)) for s in stages]
    assert [s.plan.offload_activations for s in stages] == held
    assert sorted(sum(held, ())) == sorted(names) and all(held)


# ---- plan files on 2 gloo ranks ----------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("offload")
    plans, paths = {}, []
    for case in CASES:
        plans[case] = offload_plan(*case)
        paths.append(directory / f"{'-'.join(case[:3])}.json")
        plans[case][1].save(paths[-1])
    paths.append(directory / "staged.json")
    staged_offload_plan().save(paths[-1])
    found = run_plans(paths, RunOptions(steps=STEPS, check=True, timeout_s=120, out_dir=str(directory / "run")))
    return plans, dict(zip((*CASES, STAGED), found))


def test_offloaded_plans_train_as_one_process_does(runs):
    """The three cases, and a pipeline plan whose stages offload their blocks."""
    _, reports = runs
    assert len(reports) == len(CASES) + 1
    failed = {case: r["check"] for case, r in reports.items() if not r["check"]["same_training"]}
    assert not failed, failed
    for report in reports.values():
        assert report["world_size"] == DEVICES and len(report["losses"]) == STEPS


def test_the_plans_offload_what_the_cases_say(runs):
    """The cases exercise what they claim: every block (or the first, the second recomputed)
    offloaded, and fsdp's weights sharded and gathered again in backward."""
    plans, _ = runs
    for (model, algorithm, precision, which), (plain, plan) in plans.items():
        names = tuple(b.name for b in blocks(plan.graph))
        if which == EVERY:
            assert plan.offload_activations == names and plan.recompute == ()
        else:
            assert plan.offload_activations == names[:1] and plan.recompute == names[1:2]
        assert plan.precision == precision and plan.strategy == plain.strategy
    fsdp = plans[CASES[0]][1]
    assert any(fsdp.strategy[op].regathers and _reads_a_weight(fsdp.graph, op) for op in offloaded_ops(fsdp))


def _reads_a_weight(graph, op: str) -> bool:
    return any(graph.tensors[t].role is Role.WEIGHT for t in graph.op(op).inputs)
