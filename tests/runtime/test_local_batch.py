"""Each rank may be handed only its block of an input (its shard of the batch): PlanModule says
which block (`input_boxes`) and refuses an input that is neither whole nor that block (a fake
world of 2 ranks, this process rank 0; the workers hand every rank its shard in every distributed
test)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore

from stratagem.frontend import zoo
from stratagem.runtime.errors import ExecutionError
from stratagem.runtime.execute import parallelize

from .plans import plan


@pytest.fixture(scope="module")
def module():
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    model, _ = zoo.module("mlp-tiny", "cpu", batch_size=8)
    yield parallelize(model, plan("mlp-tiny", "data-parallel", 2))
    dist.destroy_process_group()


def test_rank_0_reads_the_first_half_of_the_batch(module):
    (name,) = module.plan.graph.inputs[:1]
    shape = module.plan.graph.tensors[name].shape
    assert module.input_boxes()[name] == ((0, 4),) + tuple((0, n) for n in shape[1:])


def test_an_input_neither_whole_nor_the_ranks_block_is_refused(module):
    name = module.plan.graph.inputs[0]
    shape = list(module.plan.graph.tensors[name].shape)
    wrong = torch.zeros([3] + shape[1:])
    others = [torch.zeros(module.plan.graph.tensors[t].shape, dtype=torch.long) for t in module.plan.graph.inputs[1:]]
    with pytest.raises(ExecutionError, match=r"input .* has the wrong shape.*whole input .*this rank's block \[4"):
        module(wrong, *others)
