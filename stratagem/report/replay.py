"""A plan file back into a simulation: its graph, its cluster (or another), its strategy.

    simulation = replay(plan)                 # Simulation (PipelineSimulation for stages), run
    simulation = replay(plan, cluster="x.yaml")
    simulation = replay(plan, representative=True)   # one rank per class of devices alike (sim.ranks)
"""

from __future__ import annotations

from stratagem.plan import Plan
from stratagem.search.context import context
from stratagem.sim.pipeline import open_simulation


def model_of(plan: Plan, cluster: str | None = None):
    """The cost model the plan was priced with (or the same plan on another cluster)."""
    name = cluster or plan.cluster
    return context(plan.graph, name, plan.num_devices, plan.optimizer, precision=plan.precision,
                   recompute=plan.recompute, offload_activations=plan.offload_activations).model


def replay(plan: Plan, cluster: str | None = None, representative: bool = False):
    simulation = open_simulation(model_of(plan, cluster), plan.strategy, representative)
    simulation.run()
    return simulation
