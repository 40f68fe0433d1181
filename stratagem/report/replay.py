"""A plan file back into a simulation: its graph, its cluster (or another), its strategy and reuse.

    simulation = replay(plan)                 # Simulation, already run
    simulation = replay(plan, cluster="x.yaml")
"""

from __future__ import annotations

from stratagem.errors import ConfigError
from stratagem.plan import Plan
from stratagem.search.context import context
from stratagem.sim.builder import Simulation


def reuse_keys(plan: Plan) -> dict[tuple[str, str | None, str], str]:
    """Plan files name reuse choices "tensor:src->dst"; the simulator keys them (tensor, src, dst)."""
    out = {}
    for key, option in plan.reuse.items():
        tensor, sep, ends = key.rpartition(":")
        src, arrow, dst = ends.partition("->")
        if not sep or not arrow:
            raise ConfigError("plan reuse entry is malformed", expected='"tensor:src->dst"', got=repr(key))
        out[(tensor, None if src == "None" else src, dst)] = option
    return out


def model_of(plan: Plan, cluster: str | None = None):
    """The cost model the plan was priced with (or the same plan on another cluster)."""
    name = cluster or plan.cluster
    return context(plan.graph, name, plan.num_devices, plan.optimizer).model


def replay(plan: Plan, cluster: str | None = None):
    simulation = Simulation(model_of(plan, cluster), plan.strategy, reuse_keys(plan))
    simulation.run()
    return simulation
