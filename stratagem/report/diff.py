"""What changed between two plans: their costs side by side, and the ops whose configuration differs.

    result = diff_plans(a, b)
    result.cost_table()       time and memory (simulated and additive) of both, and the change
    result.op_table()         every op configured differently, with both configurations
"""

from __future__ import annotations

from dataclasses import dataclass

from stratagem.plan import Plan
from stratagem.report.tables import Table
from stratagem.report.units import format_bytes, format_delta, format_seconds


@dataclass(frozen=True)
class OpChange:
    op: str
    kind: str
    before: str
    after: str


@dataclass(frozen=True)
class PlanDiff:
    a: Plan
    b: Plan
    changed: tuple[OpChange, ...]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]

    @property
    def same_graph(self) -> bool:
        return not self.only_in_a and not self.only_in_b

    def cost_table(self) -> Table:
        rows = []
        for label, key, fmt in (("iteration time (simulated)", "iteration_time_s", format_seconds),
                                ("peak memory (simulated)", "peak_memory_bytes", format_bytes),
                                ("time (additive, Eq. 3)", "additive_time_s", format_seconds),
                                ("memory (additive)", "additive_memory_bytes", format_bytes)):
            before, after = getattr(self.a, key), getattr(self.b, key)
            rows.append((label, fmt(before), fmt(after), format_delta(before, after, fmt)))
        for label, key, fmt in (("compute time (busiest device)", "compute_time_s", format_seconds),
                                ("communication time", "communication_time_s", format_seconds),
                                ("communication bytes", "communication_bytes", format_bytes)):
            before, after = self.a.details.get(key), self.b.details.get(key)
            if before is not None and after is not None:
                rows.append((label, fmt(before), fmt(after), format_delta(before, after, fmt)))
        rows.append(("devices", str(self.a.num_devices), str(self.b.num_devices), ""))
        rows.append(("algorithm", self.a.algorithm, self.b.algorithm, ""))
        rows.append(("cluster", self.a.cluster, self.b.cluster, ""))
        rows.append(("precision", self.a.precision, self.b.precision, ""))
        rows.append(("recomputed blocks", str(len(self.a.recompute)), str(len(self.b.recompute)), ""))
        rows.append(("offloaded blocks", str(len(self.a.offload_activations)), str(len(self.b.offload_activations)), ""))
        rows.append(("pipeline", _stages(self.a), _stages(self.b), ""))
        return Table.of(("", "a", "b", "b - a"), rows)

    def op_table(self) -> Table:
        return Table(("op", "kind", "a", "b"), tuple((c.op, c.kind, c.before, c.after) for c in self.changed),
                     f"{len(self.changed)} of {len(self.a.graph.ops)} ops configured differently",
                     (False, False, False, False))


def diff_plans(a: Plan, b: Plan) -> PlanDiff:
    ops_a = {op.name: op for op in a.graph.ops}
    ops_b = {op.name for op in b.graph.ops}
    changed = tuple(OpChange(name, op.kind, str(a.strategy[name]), str(b.strategy[name]))
                    for name, op in ops_a.items()
                    if name in ops_b and a.strategy[name] != b.strategy[name])
    return PlanDiff(a, b, changed, tuple(n for n in ops_a if n not in ops_b),
                    tuple(op.name for op in b.graph.ops if op.name not in ops_a))


def _stages(plan: Plan) -> str:
    return str(plan.strategy.pipeline) if plan.strategy.pipeline is not None else "none"
