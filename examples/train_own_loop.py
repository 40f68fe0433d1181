"""Your own training loop around a plan: `stratagem.parallelize` with your optimizer, gradient
clipping across shards, each rank reading only its shard of the batch, and torch.compile.

    stratagem plan mlp-tiny --cluster cpu-1x2 --algorithm fsdp -o plan.json
    torchrun --nproc-per-node 2 examples/train_own_loop.py plan.json [--compile aot_eager] [--steps 3]

Prints rank 0's loss per step. The model and batches come from the zoo here; your own module
works the same way if it is the one the plan was made from (`stratagem.capture` it to plan).
On CPU use the aot_eager backend (inductor needs a C++ toolchain; on a GPU "inductor" works too).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist

import stratagem as sg
from stratagem.frontend import zoo
from stratagem.runtime import clip_grad_norm
from stratagem.runtime.training import graph_batch_size


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("plan")
    parser.add_argument("--compile", default=None, metavar="BACKEND", help="torch.compile backend (e.g. aot_eager)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--clip", type=float, default=1.0, help="global gradient norm to clip to")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    plan = sg.Plan.load(args.plan)
    name, batch_size = plan.model, graph_batch_size(plan.graph, plan.model)
    module, _ = zoo.module(name, "cpu", seed=0, batch_size=batch_size)
    model = sg.parallelize(module, plan)                         # parameters are DTensors, as planned
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)   # any torch.optim optimizer
    step = torch.compile(model, backend=args.compile) if args.compile else model
    boxes = model.input_boxes()                                  # the block of each input this rank reads
    generator = torch.Generator().manual_seed(1)
    for s in range(args.steps):
        batch = zoo.variant(name).inputs(batch_size, torch.device("cpu"), generator)   # your data loader
        mine = [x[tuple(slice(a, b) for a, b in boxes[n])].contiguous() for n, x in zip(plan.graph.inputs, batch)]
        loss = step(*mine)
        loss.backward()
        clip_grad_norm(model.parameters(), args.clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if dist.get_rank() == 0:
            print(f"step {s} loss {loss.item():.9g}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)    # skip torch's C++ teardown, which can abort gloo ranks at exit (stratagem.runtime.worker)
