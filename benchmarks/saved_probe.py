"""What the runtime keeps for backward, tensor by tensor, on this machine's device (issue 18, item 5;
issue 20's memory agreement): one forward of a plan on one rank, every tensor autograd packs
recorded with the op that was running, its shape, dtype and storage.

    PYTHONPATH=. python benchmarks/saved_probe.py PLAN.json [--device cuda] -o saved.json
    PYTHONPATH=. python benchmarks/saved_probe.py --compare A.json B.json [--block layers.3]

The first form runs the plan's forward once (a world of one rank: gloo on a CPU, NCCL on a GPU)
inside `torch.autograd.graph.saved_tensors_hooks`, and writes, per op, the tensors packed: shape,
dtype, bytes of their storage, and whether that storage was packed before (by another op or the
same one: kept once) or is a parameter's. Storages are told apart by data pointer while the
forward's outputs are alive, so no two live storages share one. It also writes the bytes of all
distinct storages kept and, on a GPU, the allocator's growth over the forward.

`--compare` prints, op by op over one block (the module-list element given), what each of two such
records keeps that the other does not: where a CUDA kernel keeps other tensors than a CPU one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

from stratagem.cost.recompute import block_of
from stratagem.files import atomic_write_json


def probe(plan_path: str, device_name: str) -> dict:
    import torch
    import torch.distributed as dist

    from stratagem.frontend import zoo
    from stratagem.plan import Plan
    from stratagem.runtime import execute
    from stratagem.runtime.training import graph_batch_size

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    cuda = device_name == "cuda"
    if cuda:
        torch.cuda.set_device(0)
        torch.set_default_device("cuda:0")
    dist.init_process_group("nccl" if cuda else "gloo")
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    plan = Plan.load(plan_path)
    batch_size = graph_batch_size(plan.graph, plan.model)
    module, _ = zoo.module(plan.model, device.type, seed=0, batch_size=batch_size)
    model = execute.parallelize(module, plan, device if cuda else None)
    inputs = zoo.variant(plan.model).inputs(batch_size, device, torch.Generator().manual_seed(1))
    params = {p.to_local().untyped_storage().data_ptr() if hasattr(p, "to_local") else p.untyped_storage().data_ptr()
              for p in model.parameters()}
    current = {"op": "(outside any op)"}
    original = execute.PlanModule._run

    def tracked(self, step, args, regather=True):
        current["op"] = step.op.name
        return original(self, step, args, regather)

    packed: list[dict] = []
    seen: set[int] = set()

    def pack(tensor):
        storage = tensor.untyped_storage()
        pointer = storage.data_ptr()
        packed.append({"op": current["op"], "shape": list(tensor.shape), "dtype": str(tensor.dtype).replace("torch.", ""),
                       "storage_bytes": storage.nbytes(), "parameter": pointer in params,
                       "again": pointer in seen})
        seen.add(pointer)
        return tensor

    execute.PlanModule._run = tracked
    try:
        if cuda:
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = model(*inputs)
        grown = torch.cuda.memory_allocated() - before if cuda else None
    finally:
        execute.PlanModule._run = original
    kept = sum(p["storage_bytes"] for p in packed if not p["again"] and not p["parameter"])
    del loss
    dist.destroy_process_group()
    return {"plan": plan_path, "model": plan.model, "device": torch.cuda.get_device_name() if cuda else "cpu",
            "torch": torch.__version__, "kept_bytes": kept, "allocated_growth_bytes": grown, "packed": packed}


def compare(first: dict, second: dict, block: str) -> None:
    print(f"{first['device']}: {first['kept_bytes'] / 2**20:,.1f} MiB kept; "
          f"{second['device']}: {second['kept_bytes'] / 2**20:,.1f} MiB kept")
    per_op = [_per_op(record, block) for record in (first, second)]
    for op in dict.fromkeys([*per_op[0], *per_op[1]]):
        a, b = (sorted(p.get(op, [])) for p in per_op)
        if a != b:
            print(f"  {op}:\n    {first['device']}: {a}\n    {second['device']}: {b}")


def _per_op(record: dict, block: str) -> dict[str, list[tuple]]:
    """Per op of `block` (ops named by module path are not in the record: every op of the block
    is one the plan's graph puts under it), the distinct storages it packed first: (shape, dtype, MiB)."""
    found: dict[str, list[tuple]] = defaultdict(list)
    graph_ops = _block_ops(record["plan"], block)
    for p in record["packed"]:
        if p["op"] in graph_ops and not p["again"] and not p["parameter"]:
            found[p["op"]].append((tuple(p["shape"]), p["dtype"], round(p["storage_bytes"] / 2**20, 2)))
    return found


def _block_ops(plan_path: str, block: str) -> set[str]:
    from stratagem.plan import Plan
    graph = Plan.load(plan_path).graph
    return {op.name for op in graph.ops if block_of(op.module) == block}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plan", nargs="?")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("-o", "--output")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"))
    parser.add_argument("--block", default="layers.3")
    args = parser.parse_args()
    if args.compare:
        first, second = (json.loads(Path(p).read_text()) for p in args.compare)
        compare(first, second, args.block)
        return 0
    if not args.plan or not args.output:
        parser.error("give a plan file and -o, or --compare A B")
    result = probe(args.plan, args.device)
    atomic_write_json(args.output, result)
    print(f"{result['device']}: {result['kept_bytes'] / 2**20:,.1f} MiB kept by autograd"
          + (f", allocator grew {result['allocated_growth_bytes'] / 2**20:,.1f} MiB" if result["allocated_growth_bytes"]
             is not None else ""))
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
