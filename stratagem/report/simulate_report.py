"""`stratagem simulate`'s report: a plan re-simulated, beside what its file recorded."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stratagem.files import atomic_write_json
from stratagem.plan import Plan
from stratagem.report.tables import Table
from stratagem.report.units import format_bytes, format_seconds
from stratagem.report.replay import replay


@dataclass(frozen=True)
class SimulationReport:
    plan: Plan
    cluster: str
    result: object                  # sim.builder.SimulationResult
    schedule_run: object = None     # sim.schedule.ScheduleRun of a plan with stages

    def lines(self) -> list[str]:
        r, p = self.result, self.plan
        same = self.cluster == p.cluster
        lines = [f"{p.model or p.graph.name} on {self.cluster}, {p.num_devices} devices, {p.algorithm} plan: "
                 f"{r.num_tasks} tasks",
                 f"  iteration time  {format_seconds(r.iteration_time_s):>10}"
                 + (f"   (plan file: {format_seconds(p.iteration_time_s)})" if same else ""),
                 f"  peak memory     {format_bytes(r.peak_memory_bytes):>10}"
                 + (f"   (plan file: {format_bytes(p.peak_memory_bytes)})" if same else "") + "  largest device",
                 f"  compute         {format_seconds(r.compute_time_s):>10}   busiest device",
                 f"  communication   {format_seconds(r.communication_time_s):>10}   summed over transfers, "
                 f"{format_bytes(r.communication_bytes)} moved"]
        return lines

    def device_table(self) -> Table:
        r, n = self.result, self.plan.num_devices       # the cluster may hold more devices than the plan uses
        rows = [(str(d), format_bytes(m), f"{u:.0%}")
                for d, (m, u) in enumerate(zip(r.peak_memory_per_device[:n], r.utilization[:n]))]
        return Table.of(("device", "peak memory", "compute busy"), rows)

    def write_trace(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, self.result.chrome_trace())
        return path


def simulate_plan(plan: Plan, cluster: str | None = None, with_trace: bool = False) -> SimulationReport:
    simulation = replay(plan, cluster, representative=not with_trace)
    return SimulationReport(plan, cluster or plan.cluster, simulation.result(with_trace),
                            getattr(simulation, "schedule_run", None))
