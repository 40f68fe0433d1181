"""stratagem: find and run parallelization strategies for training PyTorch models on many devices.

    import stratagem as sg
    g = sg.zoo.build("transformer")                 # or sg.capture(module, example_inputs)
    c = sg.cluster("v100-2x8")                      # preset name, or a YAML/JSON file path
    front = sg.frontier(g, c)                       # plans, memory ascending, time descending
    plan = sg.find_strategy(g, c, mode="mini_time", memory_cap_bytes=14.5e9)
    plan = sg.search(g, c, algorithm="mcmc", budget_s=30)
    res = sg.simulate(g, c, plan.strategy)          # iteration_time_s, peak_memory_bytes, trace
    plan.save("plan.json"); plan = sg.Plan.load("plan.json")

Only `capture`, `zoo`, `parallelize` and the runtime import torch, and only when used.
"""

from __future__ import annotations

from typing import Any

from stratagem import cluster, search, zoo
from stratagem.errors import StratagemError
from stratagem.plan import Frontier, Plan
from stratagem.search.context import check_graph, context
from stratagem.search.planner import find_strategy, frontier
from stratagem.sim.pipeline import open_simulation
from stratagem.space import Configuration, check_strategy


def simulate(graph, cluster_or_name, strategy, devices: int | None = None, optimizer: str = "adam",
             with_trace: bool = True, precision: str = "fp32"):
    """Simulate one iteration of `strategy` (FlexFlow §5): iteration time, peak memory, trace.
    `devices`: the devices the plan is for (None: those its configurations use); `precision`:
    fp32 or bf16-mixed. Without a trace, one rank stands for each class of devices the strategy
    treats alike (sim.ranks: the same figures, far fewer tasks on many devices)."""
    check_graph(graph)
    check_strategy(graph, strategy)
    ctx = context(graph, cluster_or_name, _devices_of(strategy) if devices is None else devices, optimizer,
                  precision=precision)
    simulation = open_simulation(ctx.model, strategy, representative=not with_trace)
    simulation.run()
    return simulation.result(with_trace)


def _devices_of(strategy) -> int:
    return max(c.devices.stop for c in strategy.values())


def capture(module: Any, example_inputs: Any, **kwargs: Any):
    """Any nn.Module into the IR through torch.export (parameters on meta or fake tensors)."""
    from stratagem.frontend.capture import capture as _capture
    return _capture(module, example_inputs, **kwargs)


def __getattr__(name: str):
    if name == "parallelize":
        from stratagem.runtime import parallelize
        return parallelize
    raise AttributeError(f"module 'stratagem' has no attribute {name!r}")


__all__ = ["Configuration", "Frontier", "Plan", "StratagemError", "capture", "cluster", "find_strategy",
           "frontier", "search", "simulate", "zoo"]
