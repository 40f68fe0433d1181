"""Activation offload (Megatron-LM's CPU activation offloading; `torch.autograd.graph.save_on_cpu`)
of a model's repeated blocks (cost.recompute.blocks): the one account of which ops offload, what
they send to the host, and when it comes back, for the cost model, the simulator and the runtime.

Under offload of a block (`with_offload`), for each op o of the block on each of its devices:

    forward     o keeps nothing on the device for backward: what autograd saves of its activations
                (`saved_tensors`, weights and buffers excepted: they stay resident) and what its
                kernel keeps inside go to host memory, one copy over the device's host link after
                F(o) (`offload`: device_to_host), beside the compute that follows; the device's
                copy is freed when that copy ends
    backward    when backward reaches the block (the op after the block's last op has run its
                backward), its ops' activations come back over the host link (`reload`:
                host_to_device), the block's last op first (backward's order), each B(o) after its
                own reload; they live from their reload until B(o)
    host        the offloaded bytes are held in host memory from forward until backward

Time: 2 |a_o| / B_host per op, overlapping compute where the link is free (the simulator; the
additive cost counts both copies as communication, as it counts an offloaded weight state's);
memory: a block that offloads holds nothing of its own between its forward and its backward
(recomputation holds its inputs), and in backward what a recomputed block would hold.
A block is offloaded or recomputed, not both (`check_offload`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from stratagem.cost.memory import saved_tensors
from stratagem.cost.recompute import chosen_blocks
from stratagem.errors import ConfigError
from stratagem.ir import Graph


def check_offload(graph: Graph, names: Iterable[str], recompute: Iterable[str] = ()) -> tuple[str, ...]:
    """`names`, checked: blocks of the graph, none of them also recomputed."""
    names = tuple(names)
    chosen_blocks(graph, names, "activation offload")
    both = sorted(set(names) & set(recompute))
    if both:
        raise ConfigError("a block is both recomputed and offloaded",
                          expected="each block recomputed, offloaded, or keeping its activations",
                          got=", ".join(both[:3]), hint="Name each block in one of `recompute` and "
                          "`offload_activations`")
    return names


def with_offload(graph: Graph, names: Iterable[str]) -> Graph:
    """The graph as the cost model and the simulator see it when the blocks `names` offload their
    activations: their ops keep nothing (`Op.saved` empty), and the graph's meta says which ops
    offload (`offloaded`), what each sends to the host (`offload_saved`), its block's last op
    (`offload_from`: backward reaches the block after the op that follows it) and each block's
    ops by its last op (`offload_blocks`)."""
    chosen = chosen_blocks(graph, names, "activation offload")
    if not chosen:
        return graph
    would_save, last_of, captured = {}, {}, dict(graph.meta.get("captured_saved", {}))
    by_last = {block.ops[-1]: block.ops for block in chosen}
    for block in chosen:
        for name in block.ops:
            op = graph.op(name)
            would_save[name] = saved_tensors(graph, op)
            captured.setdefault(name, op.saved)
            last_of[name] = block.ops[-1]
    ops = tuple(replace(op, saved=()) if op.name in would_save else op for op in graph.ops)
    meta = dict(graph.meta)
    meta.update(offloaded=tuple(would_save), offload_saved=would_save, offload_from=last_of,
                offload_blocks=by_last, captured_saved=captured)
    return replace(graph, ops=ops, meta=meta)


def offloaded_ops(graph: Graph) -> frozenset[str]:
    return frozenset(graph.meta.get("offloaded", ()))
