"""A plan's summary lines and the profiling table, as the `plan` and `simulate` commands print them."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

from stratagem.cost.model import MEMORY_KINDS
from stratagem.plan import Plan
from stratagem.report.stages import stage_lines
from stratagem.report.tables import Table
from stratagem.report.units import format_bytes, format_seconds
from stratagem.search.stopping import interruption


def plan_lines(plan: Plan, memory_cap_bytes: float | None = None, fits: bool = True) -> list[str]:
    d = plan.details
    lines = [f"plan: {plan.model or plan.graph.name} on {plan.cluster}, {plan.num_devices} devices, "
             f"{plan.algorithm} ({len(plan.graph.ops)} ops, {plan.precision})"]
    stop = interruption(d)
    if stop is not None:
        lines += textwrap.wrap(f"search {stop.text}", 100, initial_indent="  interrupted      ",
                               subsequent_indent=" " * 19)
    if plan.strategy.pipeline is None:
        lines += [f"  iteration time   {format_seconds(plan.iteration_time_s):>10}  simulated   "
                  f"{format_seconds(plan.additive_time_s):>10}  additive (TensorOpt Eq. 3)",
                  f"  peak memory      {format_bytes(plan.peak_memory_bytes):>10}  simulated   "
                  f"{format_bytes(plan.additive_memory_bytes):>10}  additive  (per device)"]
    else:
        lines += [f"  iteration time   {format_seconds(plan.iteration_time_s):>10}  simulated (the schedule over "
                  "one micro-batch's timeline; Eq. 3 prices no schedule)",
                  f"  peak memory      {format_bytes(plan.peak_memory_bytes):>10}  simulated (per device)"]
        lines += stage_lines(plan)
    if "compute_time_s" in d:
        lines.append(f"  compute          {format_seconds(d['compute_time_s']):>10}  busiest device; "
                     f"communication {format_seconds(d.get('communication_time_s', float('nan')))} "
                     f"({format_bytes(d.get('communication_bytes', float('nan')))} moved)")
    if d.get("throughput"):
        rate = d["throughput"]
        mfu = "" if rate.get("mfu") is None else f", MFU {100 * rate['mfu']:.1f} % (model FLOPs: 3x forward)"
        lines.append(f"  throughput       {rate['per_s']:,.0f} {rate['unit']}/s{mfu}")
    if "memory_by_kind" in d:
        kinds = d["memory_by_kind"]
        lines.append("  memory by kind   " + ", ".join(f"{kind.replace('_', ' ')} {format_bytes(kinds[kind])}"
                                                       for kind in MEMORY_KINDS if kind in kinds)
                     + f" (device {kinds.get('device', 0)}, additive)"
                     + (f"; in host memory {format_bytes(kinds['host'])} (offloaded)" if kinds.get("host") else ""))
    if d.get("host_memory"):
        host = d["host_memory"]
        verdict = "fits" if host["per_node_bytes"] <= host["node_bytes"] else "DOES NOT FIT"
        lines.append(f"  host memory      {host['per_node_bytes'] / 2**30:,.1f} GiB offloaded per node, of "
                     f"{host['node_bytes'] / 2**30:,.1f} GiB: {verdict}")
    if plan.recompute:
        shown = ", ".join(plan.recompute[:3]) + (f", ... ({len(plan.recompute)} blocks)" if len(plan.recompute) > 3 else "")
        lines.append(f"  recomputed       {shown}: each keeps only its inputs and runs its forward again in backward"
                     + _effect_text(d.get("recompute_effect"), "kept activations"))
    if plan.offload_activations:
        names = plan.offload_activations
        shown = ", ".join(names[:3]) + (f", ... ({len(names)} blocks)" if len(names) > 3 else "")
        lines.append(f"  offloaded        {shown}: each sends its activations to host memory after forward "
                     "and back before backward" + _effect_text(d.get("offload_effect"), "kept activations"))
    if d.get("weight_states"):
        owners = ", ".join(f"{n} {state}" for state, n in sorted(d["weight_states"].items()))
        lines.append(f"  weights sharded  {owners} (ops holding their weights, gradients and optimizer "
                     "state in shards over their data-parallel axes"
                     + (", offloaded ones in host memory" if "offloaded" in d["weight_states"] else "") + ")"
                     + _effect_text(d.get("weight_states_effect"), "weights, gradients and optimizer state"))
    if "memory_gap" in d:
        lines += textwrap.wrap(d["memory_gap"], 100, initial_indent="  memory model     ",
                               subsequent_indent=" " * 19)
    if d.get("chosen_because"):
        lines += textwrap.wrap(d["chosen_because"], 100, initial_indent="  chosen           ",
                               subsequent_indent=" " * 19)
    if memory_cap_bytes is not None:
        verdict = "fits" if fits else "DOES NOT FIT"
        lines.append(f"  memory cap       {format_bytes(memory_cap_bytes):>10}  {verdict}")
        if not fits:
            lines.append("  nothing fits the cap; this is the plan that needs the least memory. Raise "
                         "--memory-cap, use more devices (--devices, --mode mini-parallelism) or a smaller batch")
    return lines


def _effect_text(effect, what: str) -> str:
    if not effect:
        return ""
    time_s = effect["time_s"]
    change = f"for {format_seconds(time_s)} more time" if time_s >= 0 else f"and {format_seconds(-time_s)} less time"
    return f"; {format_bytes(effect['saved_bytes'])} less {what} per device {change} (additive)"


def profile_table(table: Mapping[int, tuple[Plan, bool]]) -> Table:
    rows = []
    for n, (plan, fits) in table.items():
        rows.append((str(n), format_seconds(plan.iteration_time_s) if fits else "does not fit",
                     format_bytes(plan.peak_memory_bytes), format_seconds(plan.additive_time_s),
                     format_bytes(plan.additive_memory_bytes)))
    return Table.of(("devices", "least time (simulated)", "its peak memory", "time (additive)",
                     "memory (additive)"), rows, "profiling: least time that fits, per device count")
