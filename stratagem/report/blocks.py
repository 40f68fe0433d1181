"""A plan block by block (issue 20, item 6): for each repeated block (cost.recompute.blocks) what
the plan does with it and what each memory-saving choice saves and costs, additive (TensorOpt
Eq. 3's terms), summed over the block's ops per device of each op, as `explain` prices them:

    rows = block_rows(plan, model)          # model: the plan's cost model (report.replay.model_of)
    table = block_table(rows)

    activations       what the plan does with its activations: kept, recomputed or offloaded
    kept              what its ops keep for backward under the plan: saved activations, kept
                      re-scheduled copies of their inputs, kernels' own buffers (a buffer several
                      of them keep counted once; one also kept in other blocks, in none)
    recompute saves   kept without recomputing the block less kept with it, and the time it adds
    and costs         (its forward again, its weights gathered or cast again): what recomputing it
                      frees, or freed
    offload saves     likewise for offloading its activations to host memory (cost.activation_offload):
    and costs         what stays on the device no longer, and the copies out and back it adds
    states            its weight owners' states (cost.weight_state), counted
    on device         their weights, gradients and optimizer state on the device
    in host memory    those of offloaded owners (the "offloaded" state), and its activations when
                      the plan offloads them
    gathers           its weights' gathers and host copies, forward and backward

An op's cost depends only on what its own block does (cost.opcost.op_facts), so the save and cost
of each block come from three priced variants of the plan's model: every block recomputed, every
block offloaded, and none of either (CostModel.with_activations), whatever the plan chose.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from stratagem.cost.recompute import Block, blocks
from stratagem.cost.sharing import credited_readers
from stratagem.plan import Plan
from stratagem.report.tables import Table
from stratagem.report.units import format_bytes, format_seconds


@dataclass(frozen=True)
class BlockRow:
    block: str
    num_ops: int
    recomputed: bool
    kept_bytes: float
    recompute_saves_bytes: float
    recompute_costs_s: float
    offloaded: bool
    offload_saves_bytes: float
    offload_costs_s: float
    states: dict[str, int]
    device_state_bytes: float
    host_bytes: float
    gather_time_s: float


def block_rows(plan: Plan, model) -> list[BlockRow]:
    """One row per repeated block of the plan's graph, in program order (none: no blocks)."""
    found = blocks(model.source_graph)
    if not found:
        return []
    names = tuple(b.name for b in found)
    variants = {"recomputed": model.with_activations(names, ()), "offloaded": model.with_activations((), names),
                "kept": model.with_activations((), ())}
    return [_row(plan, model, variants, block) for block in found]


def _row(plan: Plan, model, variants, block: Block) -> BlockRow:
    kept, time_s = {}, {}
    for choice, variant in variants.items():
        kept[choice], time_s[choice] = _kept_and_time(variant, plan, block)
    choice = "recomputed" if block.name in plan.recompute else \
        "offloaded" if block.name in plan.offload_activations else "kept"
    states: Counter[str] = Counter()
    device = host = gather_s = 0.0
    for name in block.ops:
        config = plan.strategy[name]
        cost = model.op_cost(name, config)
        memory = cost.memory
        if memory.parameter_bytes or memory.host_bytes:
            states[config.state] += 1
        device += memory.parameter_bytes + memory.gradient_bytes + memory.optimizer_bytes
        host += memory.host_bytes + memory.offloaded_bytes
        gather_s += cost.gather_time_s
    return BlockRow(block.name, len(block.ops), choice == "recomputed", kept[choice],
                    kept["kept"] - kept["recomputed"], time_s["recomputed"] - time_s["kept"],
                    choice == "offloaded", kept["kept"] - kept["offloaded"], time_s["offloaded"] - time_s["kept"],
                    dict(states), device, host, gather_s)


def _kept_and_time(model, plan: Plan, block: Block) -> tuple[float, float]:
    """What the block's ops keep for backward (their activations and the kept copies of the edges
    into them, less a buffer several of them keep once: cost.sharing) and their time with their
    input edges', under `model`."""
    kept, time_s = -_credit(model, plan, set(block.ops)), 0.0
    for name in block.ops:
        cost = model.op_cost(name, plan.strategy[name])
        kept += cost.memory.activation_bytes
        time_s += cost.time_s
    edges = model.edges()
    for name in block.ops:
        for k in model.edges_of.get(name, ()):
            if edges[k].dst_op == name:
                cost = model.edge_cost_in(edges[k], plan.strategy)
                kept += cost.extra_memory_bytes
                time_s += cost.time_s
    return kept, time_s


def _credit(model, plan: Plan, members: set[str]) -> float:
    """What the block's ops count more than once of the buffers several of them keep
    (cost.sharing's credits): a buffer all of whose keepers are in the block is counted once in
    it; one kept across blocks (RoPE's tables, read by every block) in none of them (each keeper
    in the block gives back its count; the buffer belongs to its producer outside)."""
    credit = 0.0
    for num_bytes, _, readers in credited_readers(model, plan.strategy):
        inside = sum(r in members for r in readers)
        if inside == len(readers):
            credit += num_bytes
        elif inside:
            credit += inside * num_bytes / (len(readers) - 1)
    return credit


def block_table(rows: Sequence[BlockRow], title: str = "") -> Table:
    columns = ("block", "ops", "activations", "kept", "recompute saves", "recompute costs", "offload saves",
               "offload costs", "states", "on device", "in host memory", "gathers")
    body = [(r.block, str(r.num_ops), "recomputed" if r.recomputed else "offloaded" if r.offloaded else "kept",
             format_bytes(r.kept_bytes), format_bytes(r.recompute_saves_bytes), format_seconds(r.recompute_costs_s),
             format_bytes(r.offload_saves_bytes), format_seconds(r.offload_costs_s),
             ", ".join(f"{n} {state}" for state, n in sorted(r.states.items())) or "-",
             format_bytes(r.device_state_bytes), format_bytes(r.host_bytes), format_seconds(r.gather_time_s))
            for r in rows]
    table = Table.of(columns, body, title)
    return Table(table.columns, table.rows, table.title, (False, True, False) + (True,) * 5 + (False,) + (True,) * 3)
