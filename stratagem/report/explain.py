"""A plan op by op: configuration, placements, time, memory and communication, from the cost model
the plan was priced with (TensorOpt Eq. 1-2 per op and per edge).

    rows = explain(plan)            one OpRow per op, in graph order
    table = explain_table(rows, sort="time", top=20)
Communication of an op: its gradient sync (TensorOpt's t_s) with the gathers of the weights it
holds sharded (cost.weight_state), and the re-scheduling of its inputs (t_x of the edges into it,
forward and backward), in time and in bytes moved over all groups (an offloaded weight's copies
to and from the host among them), and what it keeps in host memory when it offloads its weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stratagem.plan import Plan
from stratagem.report.replay import model_of
from stratagem.report.tables import Table
from stratagem.report.units import format_bytes, format_seconds
from stratagem.space import format_placements

SORT_KEYS = ("graph", "time", "memory", "comm")


@dataclass(frozen=True)
class OpRow:
    op: str
    kind: str
    config: str
    output_placements: str
    forward_time_s: float
    backward_time_s: float
    update_time_s: float
    sync_time_s: float             # gradient sync, and the gathers of weights held sharded
    reschedule_time_s: float
    memory_bytes: float            # per device of the op: parameters, gradients, optimizer, activations
    communication_bytes: float     # sync + re-scheduling into the op, summed over groups
    host_bytes: float = 0.0        # per device of the op: its offloaded weight, gradient and optimizer state

    @property
    def time_s(self) -> float:
        return (self.forward_time_s + self.backward_time_s + self.update_time_s + self.sync_time_s
                + self.reschedule_time_s)

    @property
    def communication_time_s(self) -> float:
        return self.sync_time_s + self.reschedule_time_s


def _step_bytes(steps) -> float:
    return sum(step.num_bytes * len(step.groups) for step in steps)


def explain(plan: Plan, model=None) -> list[OpRow]:
    model = model or model_of(plan)
    incoming: dict[str, tuple[float, float]] = {}
    for edge in model.edges():
        cost = model.edge_cost_in(edge, plan.strategy)
        time_s, num_bytes = incoming.get(edge.dst_op, (0.0, 0.0))
        incoming[edge.dst_op] = (time_s + cost.time_s,
                                 num_bytes + _step_bytes(cost.forward_steps) + _step_bytes(cost.backward_steps))
    return [_row(plan, model, op, incoming.get(op.name, (0.0, 0.0))) for op in plan.graph.ops]


def _row(plan: Plan, model, op, incoming: tuple[float, float]) -> OpRow:
    config = plan.strategy[op.name]
    cost = model.op_cost(op.name, config)
    placements = format_placements(model.layout(op.name, config).outputs) if config.levels else "whole"
    return OpRow(op.name, op.kind, str(config), placements, cost.forward_time_s, cost.backward_time_s,
                 cost.update_time_s, cost.communication_time_s, incoming[0], cost.memory_bytes,
                 _step_bytes(cost.sync) + _step_bytes(cost.gather) * (2 if cost.regather else 1) + incoming[1],
                 cost.memory.host_bytes)


def sorted_rows(rows: Sequence[OpRow], sort: str = "graph", top: int | None = None) -> list[OpRow]:
    keys = {"graph": None, "time": lambda r: -r.time_s, "memory": lambda r: -r.memory_bytes,
            "comm": lambda r: -r.communication_time_s}
    chosen = list(rows) if keys[sort] is None else sorted(rows, key=keys[sort])
    return chosen[:top] if top else chosen


def explain_table(rows: Sequence[OpRow], title: str = "") -> Table:
    """The rows as a table; with a host/device column where some op offloads its weights."""
    host = any(r.host_bytes for r in rows)
    columns = ("op", "kind", "configuration", "output", "forward", "backward", "update", "sync+gather",
               "re-schedule", "memory/device", *(("host/device",) if host else ()), "comm bytes")
    body = [(r.op, r.kind, r.config, r.output_placements, format_seconds(r.forward_time_s),
             format_seconds(r.backward_time_s), format_seconds(r.update_time_s), format_seconds(r.sync_time_s),
             format_seconds(r.reschedule_time_s), format_bytes(r.memory_bytes),
             *((format_bytes(r.host_bytes),) if host else ()), format_bytes(r.communication_bytes))
            for r in rows]
    table = Table.of(columns, body, title)
    return Table(table.columns, table.rows, table.title, (False, False, False, False) + (True,) * (len(columns) - 4))


def totals(rows: Sequence[OpRow]) -> dict[str, float]:
    """Additive sums over the ops (TensorOpt Eq. 3's terms)."""
    return {"compute_time_s": sum(r.forward_time_s + r.backward_time_s + r.update_time_s for r in rows),
            "sync_time_s": sum(r.sync_time_s for r in rows),
            "reschedule_time_s": sum(r.reschedule_time_s for r in rows),
            "communication_bytes": sum(r.communication_bytes for r in rows)}
