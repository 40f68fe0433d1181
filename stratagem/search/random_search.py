"""Random search: the fastest of `samples` strategies drawn uniformly from the space, each simulated.

    for i in 1..samples:  S_i = one configuration per group (or op), uniformly at random
    return argmin over S_i with peak(S_i) <= cap of time(S_i)       (NothingFits when none fits)

The yardstick for the randomized searches (FlexFlow §8 measures MCMC against random search), and
the example of adding a search: this file, and one line in search/registry.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stratagem import values
from stratagem.plan import Plan
from stratagem.search.context import NothingFits, PlanningContext, make_plan, runnable_space
from stratagem.search.mcmc import build_space, random_assignment
from stratagem.search.progress import phase
from stratagem.search.stopping import Interruption, fallback_plan, marked
from stratagem.sim.builder import Simulation
from stratagem.space import SpaceOptions


@dataclass(frozen=True)
class RandomOptions:
    samples: int = field(default=100, metadata={"help": "strategies to draw and simulate"})
    seed: int = field(default=0, metadata={"help": "the only source of randomness"})
    coarsen: bool = field(default=True, metadata={"help": "draw per coarsened group (Tofu §5.1), not per op"})
    runnable: bool = field(default=True, metadata={"help": "keep to what stratagem.runtime executes"})

    def __post_init__(self) -> None:
        values.integer(self.samples, "random samples")
        values.integer(self.seed, "random seed", minimum=0)


def drawn(ctx: PlanningContext, options: RandomOptions):
    """The space, and the assignments the search draws, in order."""
    space = build_space(ctx, runnable_space(SpaceOptions(), options.runnable), options.coarsen)
    rng = np.random.default_rng(options.seed)
    return space, [random_assignment(space, rng) for _ in range(options.samples)]


def random_search(ctx: PlanningContext, options: RandomOptions = RandomOptions()) -> Plan:
    """The fastest that fits of the strategies drawn, each a unit of a phase of ctx.progress.
    Stopped by Ctrl-C: the fastest so far (data parallel before any fits)."""
    try:
        space, assignments = drawn(ctx, options)
    except KeyboardInterrupt:
        return fallback_plan(ctx, "drawing random strategies")
    best, distinct = None, list(dict.fromkeys(assignments))
    with phase(ctx.progress, "random strategies", len(distinct)):
        try:
            for assignment in distinct:
                result = Simulation(ctx.model, space.strategy(assignment)).run()
                if result.peak_memory_bytes <= ctx.memory_cap_bytes and (best is None or result.iteration_time_s < best[0]):
                    best = (result.iteration_time_s, assignment)
                ctx.progress.advance()
        except KeyboardInterrupt:
            return _stopped(ctx, space, best, "simulating random strategies")
    if best is None:
        raise NothingFits(f"none of {options.samples} random strategies fits the memory cap",
                          expected=f"peak memory <= {ctx.memory_cap_bytes / 2**30:.2f} GiB",
                          got="every one over it", hint="Draw more samples, or use mcmc")
    return make_plan(ctx, space.strategy(best[1]), "random",
                     details={"samples": options.samples, "distinct": len(set(assignments)), "space": space.description})


def _stopped(ctx: PlanningContext, space, best: tuple[float, tuple] | None, phase_name: str) -> Plan:
    if best is None:
        return fallback_plan(ctx, phase_name)
    plan = make_plan(ctx, space.strategy(best[1]), "random", details={"space": space.description})
    return marked(plan, Interruption(phase_name, "the fastest strategy that fits of those simulated"))
