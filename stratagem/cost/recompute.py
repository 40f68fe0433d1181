"""Recomputation (activation checkpointing, Chen et al. 2016; torch.utils.checkpoint) of a model's
repeated blocks: the one account of which ops recompute, what they keep, and what it costs, for
the cost model, the simulator and the runtime.

    blocks(graph)   the repeated blocks: ops whose module path runs through an element of a module
                    list ("layers.3" of "layers.3.attention.wq"), grouped by that element, when
                    they are contiguous in program order and number two or more
    under recomputation of a block (`with_recompute`):
        forward     its ops run keeping nothing for backward but the block's inputs (the
                    activations it reads from outside: the checkpoint's arguments), each kept by
                    the first op of the block that reads it
        backward    when backward reaches the block its forward runs again (each op's backward
                    time grows by its forward; its inputs are re-scheduled and its weights
                    gathered or cast again), then its backward, with the recomputed activations
                    alive from the block's recomputation until each op's backward (the graph's
                    meta `recompute_saved`: what sim.lifetimes holds then)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from stratagem.cost.memory import saved_tensors
from stratagem.errors import ConfigError
from stratagem.ir import Graph, Op, Role

_ELEMENT = re.compile(r"^(.*?\.\d+)(?:\.|$)")


@dataclass(frozen=True)
class Block:
    name: str                    # the module list element, e.g. "layers.3"
    ops: tuple[str, ...]         # in program order, contiguous
    inputs: tuple[str, ...]      # activations read from outside the block (checkpoint arguments)


def block_of(module: str) -> str | None:
    """The outermost module-list element on a module path, or None."""
    match = _ELEMENT.match(module or "")
    return match.group(1) if match else None


def blocks(graph: Graph) -> tuple[Block, ...]:
    members: dict[str, list[int]] = {}
    for i, op in enumerate(graph.ops):
        name = block_of(op.module)
        if name is not None:
            members.setdefault(name, []).append(i)
    found = []
    for name, positions in members.items():
        if len(positions) < 2 or positions[-1] - positions[0] + 1 != len(positions):
            continue
        ops = tuple(graph.ops[i].name for i in positions)
        found.append(Block(name, ops, _inputs(graph, set(ops))))
    return tuple(found)


def _inputs(graph: Graph, ops: set[str]) -> tuple[str, ...]:
    found: dict[str, None] = {}
    for op in graph.ops:
        if op.name not in ops:
            continue
        for t in op.inputs:
            producer = graph.producer.get(t)
            outside = producer is None or producer.name not in ops
            if outside and graph.tensors[t].role not in (Role.WEIGHT, Role.BUFFER):
                found.setdefault(t)
    return tuple(found)


def check_recompute(graph: Graph, names: Iterable[str]) -> tuple[str, ...]:
    names = tuple(names)
    chosen_blocks(graph, names, "recomputation")
    return names


def chosen_blocks(graph: Graph, names: Iterable[str], what: str) -> list[Block]:
    """The blocks `names` (checked: each a repeated block of the graph), once each; `what` names
    the choice in the error."""
    known = {b.name: b for b in blocks(graph)}
    names = tuple(names)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"{what} names blocks the graph does not have",
                          expected=f"some of its repeated blocks ({', '.join(list(known)[:4]) or 'none'}...)",
                          got=", ".join(unknown[:3]), hint="Blocks are module-list elements, e.g. 'layers.0'")
    return [known[n] for n in dict.fromkeys(names)]


def with_recompute(graph: Graph, names: Iterable[str]) -> Graph:
    """The graph as the cost model and the simulator see it when the blocks `names` recompute:
    their ops keep only the block's inputs (`Op.saved`), and the graph's meta says which ops
    recompute (`recomputed`), what each would have kept (`recompute_saved`, the activations its
    backward holds again) and the block's last op (`recompute_from`, whose backward runs the
    recomputation first)."""
    chosen = chosen_blocks(graph, names, "recomputation")
    if not chosen:
        return graph
    saved_by, would_save, last_of, captured = {}, {}, {}, dict(graph.meta.get("captured_saved", {}))
    for block in chosen:
        first_reader: dict[str, str] = {}
        for name in block.ops:
            for t in graph.op(name).inputs:
                if t in block.inputs:
                    first_reader.setdefault(t, name)
        for name in block.ops:
            op = graph.op(name)
            saved_by[name] = tuple(t for t, reader in first_reader.items() if reader == name)
            would_save[name] = tuple(t for t in saved_tensors(graph, op) if t not in saved_by[name])
            captured.setdefault(name, op.saved)
            last_of[name] = block.ops[-1]
    ops = tuple(replace(op, saved=saved_by[op.name]) if op.name in saved_by else op for op in graph.ops)
    meta = dict(graph.meta)
    meta.update(recomputed=tuple(saved_by), recompute_saved=would_save, recompute_from=last_of,
                captured_saved=captured)
    return replace(graph, ops=ops, meta=meta)


def as_captured(graph: Graph, op: Op) -> Op:
    """`op` as it keeps tensors when its block neither recomputes nor offloads."""
    captured = graph.meta.get("captured_saved", {})
    return replace(op, saved=captured[op.name]) if op.name in captured else op


def recomputed_ops(graph: Graph) -> frozenset[str]:
    return frozenset(graph.meta.get("recomputed", ()))
