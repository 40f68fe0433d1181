"""Where FT's costs and the simulator's disagree on a plan, said in the plan's details.

FT prices a strategy by the cost model's sums (search.space.additive_cost): what stays until
backward, summed over every op and edge as if all ran on each device, plus the largest transient
term (cost.transient), from which what the op's descendants keep is taken at its least (split
over every device: cost.made). The simulator measures the peak on its timeline. They agree
within `MEMORY_AGREEMENT` where the descendants of the op at the peak keep their tensors split
over every device; elsewhere (descendants that keep more, ops on disjoint device blocks,
transients that overlap) the plan carries `memory_gap`: both figures, where FT's largest
transient is, and where and when the simulated peak is, with what is held then.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stratagem.cost.transient import plan_transient
from stratagem.space import Configuration

MEMORY_AGREEMENT = 0.02      # relative; the bound on |FT memory - simulated peak| / peak


def memory_gap_note(model, strategy: Mapping[str, Configuration], additive_memory_bytes: float,
                    simulation, peak: float, terms: Sequence[tuple] | None = None) -> str | None:
    """None when FT's memory is within MEMORY_AGREEMENT of the simulated `peak`; else what
    differs (the simulation's peak breakdown is worked out only then). `terms`: the strategy's
    transient_terms, where the caller has them already."""
    if peak <= 0 or abs(additive_memory_bytes - peak) <= MEMORY_AGREEMENT * peak:
        return None
    breakdown = simulation.peak_breakdown(top=3)
    transient_bytes, where = plan_transient(model, strategy, terms)
    held = ", ".join(f"{name} {_mib(b)}" for name, b in breakdown.holders)
    side = "over" if additive_memory_bytes > peak else "under"
    return (f"FT's memory {_mib(additive_memory_bytes)} is {abs(additive_memory_bytes / peak - 1):.1%} {side} "
            f"the simulated peak {_mib(peak)}. FT adds what stays until backward over every op and "
            f"its largest transient ({_mib(transient_bytes)} at {where or 'none'}, less what the op's "
            f"descendants keep, at its least); simulated, device {breakdown.device} peaks at "
            f"{breakdown.time_s * 1e3:.3f} ms, during {breakdown.running or 'no task'}, holding most "
            f"in {held or 'nothing'}.")


def _mib(num_bytes: float) -> str:
    return f"{num_bytes / 2**20:,.1f} MiB"


__all__ = ["MEMORY_AGREEMENT", "memory_gap_note"]
