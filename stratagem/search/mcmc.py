"""MCMC search over the SOAP space (FlexFlow §6): Metropolis-Hastings on simulated time.

    cost(S)      simulated iteration time of S; a proposal rebuilds only the tasks of the ops it
                 changes (FlexFlow §5.3's delta task-graph update) and re-times the graph
                 (`search.evaluators`: by Algorithm 2, FlexFlow's delta simulation, by default;
                 or everything from scratch, Table 5's baseline). Costs are
                 cached by strategy across the chains: a strategy met again costs no simulation
                                                                                 `run_chain`
    feasible(S)  simulated peak memory <= the planning context's memory cap
    proposal     S* = S with one random variable (an op) given a random other choice: symmetric,
                 q(S*|S) = q(S|S*) = 1 / (V (K_v - 1)), so Eq. 1 is the whole acceptance rule
                                                                                 `_propose`
    accept       alpha(S*|S) = min(1, exp(beta (cost(S) - cost(S*))))   FlexFlow Eq. 1  `accept`
    memory       rejection, not a penalty: the cap is a hard limit (a plan that does not fit does
                 not run), a penalty would need an exchange rate between bytes and seconds, and
                 rejecting keeps the chain inside the feasible set. A chain that starts infeasible
                 (a data-parallel start on a model too large for one device) walks downhill on the
                 overflow until it is feasible, then never leaves the feasible set.    `accept`
    beta         relative_beta / t_ref with t_ref the data-parallel strategy's simulated time:
                 a proposal 1 % of t_ref slower is accepted with probability exp(-relative_beta
                 / 100) (default relative_beta 100: e^-1 = 0.37; 5 % slower: e^-5 = 0.007), so
                 the chain is nearly greedy but steps over small ridges, at any model's time
                 scale. An absolute beta (1/s) overrides it.                           `_beta`
    candidates   data parallel, the expert strategy (`search.expert`), random strategies, and FT's
                 frontier points (the fitting ones, fastest first)          `initial_candidates`
    stopping     per candidate (FlexFlow §6.2): its budget (budget_s / number of candidates, or
                 max_proposals) is spent, or its chain's best has not improved for half of it
                                                                              `_Limits.done`
                 or Ctrl-C: the best strategy so far (search.stopping)        `mcmc_search`
    progress     each chain a phase of ctx.progress, counted in proposals (of max_proposals)

kwargs of `mcmc` (and of `search(..., algorithm="mcmc")`):
    budget_s=10.0        seconds for the whole search, split evenly over the initial candidates;
                         None: no time limit (then give max_proposals)
    max_proposals=None   proposals per candidate. The chain is a function of the seed alone, so
                         with budget_s=None the plan is reproducible; with a time budget, the
                         proposals made in time depend on the machine (the chain is the same
                         prefix of the same sequence, cut off by the clock)
    seed=0               the only source of randomness (numpy Generator, one spawned per chain)
    beta=None, relative_beta=100.0        see beta above
    initial=("data-parallel", "expert", "random")   also "ft" (runs Frontier Tracking first)
    num_random=1, ft_points=1             how many random and FT candidates
    space=SpaceOptions()  the configurations proposed (default: the whole SOAP space)
    coarsen=False         walk the coarsened groups (Tofu §5.1) instead of single ops
    simulation="delta"         (Algorithm 2 re-timing) or "incremental" (Algorithm 1 over the edited
                               graph) or "full" (every proposal from scratch, Table 5's baseline)
    runnable=True         keep to what stratagem.runtime executes (False: the whole space)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from stratagem import values
from stratagem.errors import ConfigError
from stratagem.plan import Plan
from stratagem.search.choices import ChoiceSpace, group_space, op_space
from stratagem.search.context import NothingFits, make_plan, runnable_space
from stratagem.search.evaluators import EVALUATORS, DeltaEvaluator, FullEvaluator
from stratagem.search.expert import expert_strategy
from stratagem.search.ft_search import frontier
from stratagem.search.progress import SILENT, Progress, phase
from stratagem.search.stopping import Interruption, fallback_plan, marked, raise_if_stopped
from stratagem.search.strategies import data_parallel_strategy
from stratagem.sim.builder import Simulation
from stratagem.space import SpaceOptions

CANDIDATES = ("data-parallel", "expert", "random", "ft")


@dataclass(frozen=True)
class MCMCOptions:
    budget_s: float | None = 10.0
    max_proposals: int | None = None
    seed: int = 0
    beta: float | None = None
    relative_beta: float = 100.0
    initial: tuple[str, ...] = ("data-parallel", "expert", "random")
    num_random: int = 1
    ft_points: int = 1
    simulation: str = "delta"
    space: SpaceOptions = SpaceOptions()
    coarsen: bool = False
    runnable: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "initial", tuple(self.initial))
        if self.budget_s is not None:
            values.positive(self.budget_s, "MCMC budget_s")
        if self.max_proposals is not None:
            values.integer(self.max_proposals, "MCMC max_proposals")
        values.integer(self.seed, "MCMC seed", minimum=0)
        if self.budget_s is None and self.max_proposals is None:
            raise ConfigError("MCMC has no stopping rule", expected="budget_s or max_proposals",
                              got="neither", hint="Pass budget_s=10 or max_proposals=1000")
        unknown = [c for c in self.initial if c not in CANDIDATES]
        if unknown or not self.initial:
            raise ConfigError("unknown initial candidates", expected=f"some of {CANDIDATES}",
                              got=repr(self.initial))
        if self.simulation not in EVALUATORS:
            raise ConfigError("unknown simulation mode", expected=f"one of {sorted(EVALUATORS)}",
                              got=repr(self.simulation))


# ---- energies and acceptance ----------------------------------------------------------------------

@dataclass(frozen=True)
class Energy:
    time_s: float
    overflow_bytes: float          # peak memory above the cap; 0 when the strategy fits

    @property
    def feasible(self) -> bool:
        return self.overflow_bytes <= 0.0


def energy(time_s: float, peak_bytes: float, cap_bytes: float) -> Energy:
    return Energy(time_s, max(0.0, peak_bytes - cap_bytes))


def accept(current: Energy, proposed: Energy, beta: float, u: float) -> bool:
    """Eq. 1 between feasible strategies; infeasible ones rejected, or walked down (see above)."""
    if not current.feasible:
        return proposed.feasible or proposed.overflow_bytes <= current.overflow_bytes
    if not proposed.feasible:
        return False
    return u < math.exp(min(0.0, beta * (current.time_s - proposed.time_s)))


# ---- one chain ------------------------------------------------------------------------------------

@dataclass
class _Limits:
    budget_s: float | None
    max_proposals: int | None
    clock: Callable[[], float] = time.perf_counter

    def done(self, proposals: int, elapsed_s: float, since_best: int, since_best_s: float) -> bool:
        if self.max_proposals is not None and (proposals >= self.max_proposals or
                                               since_best >= self.max_proposals / 2):
            return True
        return self.budget_s is not None and (elapsed_s >= self.budget_s or since_best_s >= self.budget_s / 2)


@dataclass(frozen=True)
class ChainResult:
    name: str
    start: Energy
    best: Energy
    best_assignment: tuple[int, ...]
    proposals: int
    accepted: int
    simulated: int                # proposals that needed a simulation (the rest were cached)
    elapsed_s: float
    best_at_s: float              # when the chain found its best (seconds into the chain)
    interrupted: bool = False     # a Ctrl-C stopped it: its best so far (search.stopping)


def _propose(space: ChoiceSpace, movable: Sequence[int], assignment: Sequence[int],
             rng: np.random.Generator) -> tuple[int, int]:
    index = movable[int(rng.integers(len(movable)))]
    choice = int(rng.integers(space.variables[index].num_choices - 1))
    return index, choice + (choice >= assignment[index])


def run_chain(name: str, evaluator, cap_bytes: float, beta: float, limits: _Limits,
              rng: np.random.Generator, seen: dict | None = None, progress: Progress = SILENT) -> ChainResult:
    """One Metropolis-Hastings chain. `seen` caches (time, peak) by assignment across proposals
    and chains: a proposal met before costs no simulation, and if rejected, no undo either.
    `progress` is told each proposal; a Ctrl-C ends the chain with its best so far."""
    space, seen = evaluator.space, {} if seen is None else seen
    movable = [i for i, v in enumerate(space.variables) if v.num_choices > 1]
    current = start = energy(*evaluator.current(), cap_bytes)
    best, best_assignment = current, tuple(evaluator.assignment)
    seen.setdefault(best_assignment, evaluator.current())
    proposals = accepted = last_best = simulated = 0
    began = limits.clock()
    last_best_s = elapsed = 0.0
    interrupted = False
    try:
        while movable and not limits.done(proposals, elapsed, proposals - last_best, elapsed - last_best_s):
            index, choice = _propose(space, movable, evaluator.assignment, rng)
            key = tuple(choice if i == index else c for i, c in enumerate(evaluator.assignment))
            known = seen.get(key)
            if known is None:
                known = seen[key] = evaluator.propose(index, choice)
                simulated += 1
                fresh = True
            else:
                fresh = False
            proposed = energy(*known, cap_bytes)
            proposals += 1
            elapsed = limits.clock() - began
            progress.advance()
            if not accept(current, proposed, beta, float(rng.random())):
                if fresh:
                    evaluator.revert()
                continue
            evaluator.commit() if fresh else evaluator.move(index, choice, known)
            accepted, current = accepted + 1, proposed
            if _better(current, best):
                best, best_assignment = current, key
                last_best, last_best_s = proposals, elapsed
    except KeyboardInterrupt:
        interrupted = True
    return ChainResult(name, start, best, best_assignment, proposals, accepted, simulated,
                       limits.clock() - began, last_best_s, interrupted)


def _better(a: Energy, b: Energy) -> bool:
    if a.feasible != b.feasible:
        return a.feasible
    return a.time_s < b.time_s if a.feasible else a.overflow_bytes < b.overflow_bytes


# ---- candidates and the search --------------------------------------------------------------------

def initial_candidates(ctx, space: ChoiceSpace, options: MCMCOptions, rng: np.random.Generator,
                       cap_bytes: float) -> list[tuple[str, tuple[int, ...]]]:
    out: list[tuple[str, tuple[int, ...]]] = []
    for kind in options.initial:
        if kind == "data-parallel":
            out.append((kind, space.project(data_parallel_strategy(ctx))))
        elif kind == "expert":
            out.append((kind, space.project(expert_strategy(ctx))))
        elif kind == "random":
            out.extend((f"random {i}", random_assignment(space, rng)) for i in range(options.num_random))
        elif kind == "ft":
            out.extend((f"ft {i}", space.project(s)) for i, s in enumerate(_ft_strategies(ctx, cap_bytes,
                                                                                       options.ft_points)))
    return out


def random_assignment(space: ChoiceSpace, rng: np.random.Generator) -> tuple[int, ...]:
    return tuple(int(rng.integers(v.num_choices)) for v in space.variables)


def _ft_strategies(ctx, cap_bytes: float, count: int) -> list[dict]:
    front = frontier(ctx)
    raise_if_stopped(front)
    plans = sorted(front, key=lambda p: p.iteration_time_s)
    fitting = [p for p in plans if p.peak_memory_bytes <= cap_bytes] or plans[:1]
    return [dict(p.strategy) for p in fitting[:count]]


def _beta(ctx, space: ChoiceSpace, options: MCMCOptions) -> tuple[float, float]:
    """(beta in 1/s, t_ref in s)."""
    sim = Simulation(ctx.model, space.strategy(space.project(data_parallel_strategy(ctx))))
    sim.store.simulate()
    t_ref = sim.summary()[0]
    return (options.beta if options.beta is not None else options.relative_beta / t_ref), t_ref


@dataclass(frozen=True)
class MCMCResult:
    assignment: tuple[int, ...]
    best: Energy
    chains: tuple[ChainResult, ...]
    beta: float
    reference_time_s: float
    space: ChoiceSpace = field(repr=False)
    interrupted: bool = False           # a Ctrl-C stopped the search: the chains run so far

    @property
    def strategy(self) -> dict:
        return self.space.strategy(self.assignment)

    @property
    def proposals(self) -> int:
        return sum(c.proposals for c in self.chains)

    @property
    def search_time_s(self) -> float:
        return sum(c.elapsed_s for c in self.chains)

    @property
    def time_to_best_s(self) -> float:
        """Search time until the winning strategy was first found (chains run one after another)."""
        spent = 0.0
        for chain in self.chains:
            if chain.best == self.best and chain.best_assignment == self.assignment:
                return spent + chain.best_at_s
            spent += chain.elapsed_s
        return spent

    @property
    def proposals_per_s(self) -> float:
        return self.proposals / self.search_time_s if self.search_time_s > 0 else float("nan")


def mcmc_search(ctx, space: ChoiceSpace, options: MCMCOptions = MCMCOptions(),
                clock: Callable[[], float] = time.perf_counter) -> MCMCResult:
    """The chains one after another, each a phase of ctx.progress in proposals. A Ctrl-C ends
    the search with the chains run so far (the one stopped with its best so far); before the
    first chain it is raised."""
    cap = ctx.memory_cap_bytes
    seeds = np.random.SeedSequence(options.seed)
    candidates = initial_candidates(ctx, space, options, np.random.default_rng(seeds.spawn(1)[0]), cap)
    beta, t_ref = _beta(ctx, space, options)
    per_chain_s = options.budget_s / len(candidates) if options.budget_s is not None else None
    chains, seen, interrupted = [], {}, False
    for i, ((name, assignment), chain_seed) in enumerate(zip(candidates, seeds.spawn(len(candidates)))):
        try:
            with phase(ctx.progress, _chain_phase(i, len(candidates), name, per_chain_s), options.max_proposals):
                evaluator = EVALUATORS[options.simulation](ctx.model, space, assignment)
                chains.append(run_chain(name, evaluator, cap, beta, _Limits(per_chain_s, options.max_proposals, clock),
                                        np.random.default_rng(chain_seed), seen, ctx.progress))
        except KeyboardInterrupt:
            if not chains:
                raise
            interrupted = True
        if interrupted or chains[-1].interrupted:
            interrupted = True
            break
    winner = min(chains, key=lambda c: (not c.best.feasible, c.best.time_s if c.best.feasible
                                        else c.best.overflow_bytes))
    return MCMCResult(winner.best_assignment, winner.best, tuple(chains), beta, t_ref, space, interrupted)


def _chain_phase(i: int, count: int, name: str, budget_s: float | None) -> str:
    budget = f", {budget_s:.3g} s budget" if budget_s is not None else ""
    return f"MCMC chain {i + 1}/{count} from {name}{budget}: proposals"


def build_space(ctx, space: SpaceOptions = SpaceOptions(), coarsen: bool = False) -> ChoiceSpace:
    return group_space(ctx.model, space) if coarsen else op_space(ctx.model, space)


def mcmc(ctx, options: MCMCOptions = MCMCOptions()) -> Plan:
    """The best strategy the chains found, simulated. Stopped by Ctrl-C: the best so far (not
    fitting the cap, where none found did), or data parallel before the first chain."""
    try:
        space = build_space(ctx, runnable_space(options.space, options.runnable), options.coarsen)
        result = mcmc_search(ctx, space, options)
    except KeyboardInterrupt:
        return fallback_plan(ctx, "MCMC's initial candidates")
    if result.interrupted:
        record = Interruption(f"MCMC's chain {len(result.chains)}",
                              f"the best strategy of {result.proposals} proposals in {len(result.chains)} chains")
        return marked(make_plan(ctx, result.strategy, "mcmc", details=_details(result)), record)
    if not result.best.feasible:
        raise NothingFits("MCMC found no strategy that fits the memory cap",
                          expected="peak memory within the cap",
                          got=f"{result.best.overflow_bytes / 2**30:.2f} GiB over it at best after "
                              f"{result.proposals} proposals",
                          hint="Give MCMC more budget_s or max_proposals, more devices, or a smaller batch")
    return make_plan(ctx, result.strategy, "mcmc", details=_details(result))


def _details(result: MCMCResult) -> dict:
    return {"beta_per_s": result.beta, "reference_time_s": result.reference_time_s,
            "space": result.space.description, "space_size": result.space.size,
            "proposals": result.proposals, "simulations": sum(c.simulated for c in result.chains),
            "search_time_s": result.search_time_s,
            "proposals_per_s": result.proposals_per_s, "feasible": result.best.feasible,
            "time_to_best_s": result.time_to_best_s,
            "chains": [{"start": c.name, "start_time_s": c.start.time_s, "best_time_s": c.best.time_s,
                        "proposals": c.proposals, "accepted": c.accepted, "simulated": c.simulated,
                        "elapsed_s": c.elapsed_s}
                       for c in result.chains]}


__all__ = ["ChainResult", "DeltaEvaluator", "Energy", "FullEvaluator", "MCMCOptions", "MCMCResult",
           "accept", "build_space", "energy", "initial_candidates", "mcmc", "mcmc_search", "run_chain"]
