"""Exhaustive search: the exact least simulated iteration time (FlexFlow §8.3: DFS with A* pruning).

Depth-first branch and bound over the variables of a `ChoiceSpace` in graph order
(`BranchAndBound._order`):

    ub = best simulated time of the incumbents (data parallel, expert, a short MCMC), fitting
    dfs(i, partial):                                                     `BranchAndBound.dfs`
        if i == V: simulate partial (the previous leaf's task graph, edited); if it fits
                   the memory cap and beats ub, it is the new incumbent  `BranchAndBound.leaf`
        for each choice c of variable i, in order of its cheap bound: `BranchAndBound.children`
            skip c if the resident bytes on some device exceed the cap (no completion fits)
            skip c if the busy or work bound of partial + c is >= ub (no completion is faster)
            skip c if the path, device or sync bound is >= ub       `BranchAndBound.admit`
            dfs(i + 1, partial + c)                     (bounds and proofs: `search.bounds`)

Every strategy not visited was cut by a bound that holds for all its completions, so the result
is the minimum over the whole space of the strategies that fit (memory-infeasible ones excluded).

Refusing what it cannot finish (`ExhaustiveTooLarge`, with an estimate), in two stages:
  before    Knuth's estimator (random root-to-leaf probes through the same pruned tree, each
            probe's product of branching factors an unbiased estimate of the nodes per depth)
            predicts the work under the incumbent's bound; the tree actually searched is a
            subtree of it (ub only falls). Its variance is large, so it refuses only when the
            prediction exceeds max_time_s ten times (`BranchAndBound.estimate`).
  during    the search stops at max_time_s and reports the share of the tree behind its
            position, counting sibling subtrees as equal, and the total time that implies
            (`BranchAndBound.fraction_done`).

kwargs of `exhaustive` (and of `search(..., algorithm="exhaustive")`):
    space=SpaceOptions()     configurations (default: FlexFlow's whole SOAP space)
    coarsen=False            one variable per coarsened group instead of per op
    max_time_s=600.0         give up (with an estimate) after this long, or at once when Knuth's
                             estimate is ten times longer
    probes=20                Knuth probes for the prediction (0: no prediction)
    incumbent_proposals=200  MCMC proposals per candidate for the first incumbent (0: none)
    seed=0                   the probes' and the incumbent MCMC's randomness
"""

from __future__ import annotations

import time
from collections import ChainMap
from dataclasses import dataclass, field

import numpy as np

from stratagem import values
from stratagem.errors import StratagemError
from stratagem.plan import Plan
from stratagem.search.bounds import Bounds
from stratagem.search.choices import ChoiceSpace
from stratagem.search.context import NothingFits, make_plan, runnable_space
from stratagem.search.evaluators import REBUILD_EVERY
from stratagem.search.mcmc import MCMCOptions, build_space, mcmc_search
from stratagem.search.progress import phase
from stratagem.search.stopping import Interruption, fallback_plan, marked
from stratagem.sim.builder import Simulation
from stratagem.space import SpaceOptions

SLACK = 1e-9          # a bound within this relative distance of ub does not prune (rounding)
HOPELESS = 10.0       # refuse without trying when Knuth's estimate exceeds max_time_s this many times


class ExhaustiveTooLarge(StratagemError):
    """The exhaustive search would not finish in the time allowed."""


@dataclass(frozen=True)
class Estimate:
    leaves: float
    bound_evaluations: float
    seconds: float


@dataclass(frozen=True)
class ExhaustiveResult:
    assignment: tuple[int, ...]
    time_s: float
    peak_memory_bytes: float
    nodes: int
    leaves: int
    elapsed_s: float
    estimate: Estimate
    space: ChoiceSpace = field(repr=False)
    interrupted: bool = False       # a Ctrl-C stopped it: the incumbent when it stopped

    @property
    def strategy(self) -> dict:
        return self.space.strategy(self.assignment)


@dataclass
class _Node:
    lb: float
    choice: int
    busy: np.ndarray
    resident: np.ndarray


class BranchAndBound:
    def __init__(self, ctx, space: ChoiceSpace, cap_bytes: float, incumbent: tuple[int, ...], ub: float):
        self.space, self.cap = space, cap_bytes
        self.sim = Simulation(ctx.model, space.strategy(incumbent))
        self.sim.run()
        self.bounds = Bounds(ctx.model, space, self.sim)
        self.num_devices = ctx.model.num_devices
        self.best, self.ub = tuple(incumbent), ub
        self.reporter = ctx.progress                # told each strategy simulated (`leaf`)
        self.best_peak = float("nan")
        self.order = self._order()
        position = {v: i for i, v in enumerate(self.order)}
        self.crossing: list[list[int]] = [[] for _ in self.order]     # edges whose last end is fixed at depth i
        for k, a, b in self.bounds.cross_edges:
            self.crossing[max(position[a], position[b])].append(k)
        min_work = self.bounds.min_work[self.order]
        self.rest_work = np.concatenate([np.cumsum(min_work[::-1])[::-1][1:], [0.0]])
        self.reset()

    def _order(self) -> list[int]:
        """Variables with one choice first (fixed once, on the single path through them), then in
        graph order, so that edges complete, and their re-scheduling enters the bounds, early.
        (Ordering by the spread of a variable's own busy time over its choices made LeNet's
        search 4x slower and RNNLM-2's 1.4x faster: benchmarks/search_optimum.py.)"""
        return sorted(range(len(self.space.variables)),
                      key=lambda v: (self.space.variables[v].num_choices > 1, v))

    def reset(self, deadline: float = float("inf")) -> None:
        n = len(self.space.variables)
        self.deadline = deadline
        self.progress: list[list[int]] = []
        self.assignment = [0] * n
        self.pending: dict = {}
        self.bounds.reset()
        self.work = 0.0
        self.nodes = self.leaves = 0

    # ---- one level ----------------------------------------------------------------------------
    def children(self, i: int, busy: np.ndarray, resident: np.ndarray, ub: float) -> list[_Node]:
        """The choices of the variable at depth i that the memory, busy and work bounds keep,
        best bound first (the costlier bounds come in `admit`, for the children visited)."""
        v = self.order[i]
        var, b = self.space.variables[v], self.bounds
        out = []
        for c, choice in enumerate(var.choices):
            res = resident + b.resident_bytes[v][c]
            if res[:self.num_devices].max() > self.cap:
                continue
            configs = ChainMap(dict(zip(var.ops, choice)), b.configs)
            new_busy = busy + b.own[v][c]
            for k in self.crossing[i]:
                new_busy = new_busy + b.edge_busy(k, configs)
            work = (self.work + b.work_by_choice[v][c] + self.rest_work[i]) / self.num_devices
            lb = max(float(new_busy.max()), work)
            if lb * (1 - SLACK) < ub:
                out.append(_Node(lb, c, new_busy, res))
        out.sort(key=lambda node: (node.lb, node.choice))
        return out

    def admit(self, node: _Node, ub: float) -> bool:
        """After `enter`: whether the path, device and sync bounds keep the node too."""
        node.lb = max(node.lb, self.bounds.evaluate(enough=ub / (1 - SLACK)))
        return node.lb * (1 - SLACK) < ub

    def enter(self, i: int, node: _Node) -> None:
        v = self.order[i]
        var = self.space.variables[v]
        self.assignment[v] = node.choice
        self.pending.update(zip(var.ops, var.choices[node.choice]))
        self.bounds.fix(v, node.choice)
        self.work += self.bounds.work_by_choice[v][node.choice]

    def leave(self, i: int, node: _Node) -> None:
        v = self.order[i]
        self.bounds.unfix(v)
        self.work -= self.bounds.work_by_choice[v][node.choice]

    # ---- the search ---------------------------------------------------------------------------
    def dfs(self, i: int, busy: np.ndarray, resident: np.ndarray) -> None:
        self.nodes += 1
        if time.perf_counter() > self.deadline:
            raise _OutOfTime
        if i == len(self.space.variables):
            self.leaf()
            return
        kids = self.children(i, busy, resident, self.ub)
        self.progress.append([0, len(kids)])
        for node in kids:
            if node.lb * (1 - SLACK) >= self.ub:
                break
            self.enter(i, node)
            if self.admit(node, self.ub):
                self.dfs(i + 1, node.busy, node.resident)
            self.leave(i, node)
            self.progress[-1][0] += 1
        self.progress.pop()

    def fraction_done(self) -> float:
        """Share of the tree behind the DFS position, counting sibling subtrees as equal."""
        done, weight = 0.0, 1.0
        for finished, siblings in self.progress:
            done += weight * finished / siblings
            weight /= siblings
        return done

    def leaf(self) -> None:
        """Simulate the complete strategy: the previous leaf's task graph with the ops changed
        since then rebuilt, re-timed by Algorithm 2 (see `search.evaluators`)."""
        self.leaves += 1
        self.reporter.advance()
        store = self.sim.store
        if self.leaves % REBUILD_EVERY == 0 and store.n > 4 * int(store.alive[:store.n].sum()):
            self.sim = Simulation(self.sim.model, self.space.strategy(self.assignment))
            self.sim.run()
            time_s, peak = self.sim.summary()
        else:
            time_s, peak = self.sim.change_many(self.pending, retime="delta")
        self.pending.clear()
        if peak <= self.cap and time_s < self.ub:
            self.best, self.ub, self.best_peak = tuple(self.assignment), time_s, peak

    def start(self) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(self.bounds.num_resources), np.zeros(self.bounds.num_resources)

    # ---- Knuth's estimate -----------------------------------------------------------------------
    def estimate(self, probes: int, rng: np.random.Generator, seconds_per_leaf: float,
                 give_up_s: float, time_limit_s: float = float("inf")) -> Estimate:
        """Knuth's estimate from up to `probes` probes, stopping early once the estimate passes
        give_up_s or the probes have taken time_limit_s (a probe cut short gives a lower bound:
        the evaluations its partial walk already implies)."""
        if probes < 1:
            return Estimate(float("nan"), float("nan"), float("nan"))
        began = time.perf_counter()
        leaves, evaluations, evaluated = [], [], 0
        for _ in range(probes):
            width, expected, done, finished = self._probe(rng, began + time_limit_s)
            leaves.append(width if finished else float("nan"))
            evaluations.append(expected)
            evaluated += done
            if not finished or np.mean(leaves) * seconds_per_leaf > give_up_s:
                break
        per_evaluation = (time.perf_counter() - began) / max(1, evaluated)
        mean_leaves, mean_evaluations = float(np.mean(leaves)), float(np.mean(evaluations))
        seconds = mean_evaluations * per_evaluation + (mean_leaves * seconds_per_leaf if finished else 0.0)
        return Estimate(mean_leaves, mean_evaluations, seconds)

    def _admitted(self, i: int, node: _Node) -> bool:
        self.enter(i, node)
        kept = self.admit(node, self.ub)
        self.leave(i, node)
        return kept

    def _probe(self, rng: np.random.Generator, deadline: float) -> tuple[float, float, int, bool]:
        """One random walk down the pruned tree: (leaves estimate, bound evaluations estimate,
        bound evaluations done, whether it reached the bottom before the deadline)."""
        self.reset()
        busy, resident = self.start()
        width, expected, done, path, finished = 1.0, 0.0, 0, [], True
        for i, v in enumerate(self.order):
            if time.perf_counter() > deadline:
                finished = False
                break
            var = self.space.variables[v]
            expected += width * var.num_choices
            done += var.num_choices
            kids = [kid for kid in self.children(i, busy, resident, self.ub) if self._admitted(i, kid)]
            if not kids:
                width = 0.0
                break
            width *= len(kids)
            node = kids[int(rng.integers(len(kids)))]
            self.enter(i, node)
            path.append((i, node))
            busy, resident = node.busy, node.resident
        for i, node in reversed(path):
            self.leave(i, node)
        self.reset()
        return width, expected, done, finished


def _incumbent(ctx, space: ChoiceSpace, cap: float, proposals: int, seed: int) -> tuple[tuple[int, ...], float, float]:
    """Best fitting strategy among data parallel, expert and a short MCMC: (assignment, time, s/leaf)."""
    initial = ("data-parallel", "expert")
    options = MCMCOptions(budget_s=None, max_proposals=max(1, proposals), seed=seed, initial=initial)
    result = mcmc_search(ctx, space, options)
    if result.interrupted:
        raise KeyboardInterrupt                                       # stopped by Ctrl-C: no search follows
    per_leaf = result.search_time_s / max(1, result.proposals) / 2   # a proposal is two deltas at most
    if result.best.feasible:
        return result.assignment, result.best.time_s, per_leaf
    return result.assignment, float("inf"), per_leaf


class _OutOfTime(Exception):
    pass


def exhaustive_search(ctx, space: ChoiceSpace, max_time_s: float = 600.0, probes: int = 20,
                      incumbent_proposals: int = 200, seed: int = 0) -> ExhaustiveResult:
    values.positive(max_time_s, "exhaustive max_time_s")
    values.integer(seed, "exhaustive seed", minimum=0)
    cap = ctx.memory_cap_bytes
    assignment, ub, per_leaf = _incumbent(ctx, space, cap, incumbent_proposals, seed)
    search = BranchAndBound(ctx, space, cap, assignment, ub)
    estimate, began, stopped = Estimate(float("nan"), float("nan"), float("nan")), time.perf_counter(), False
    try:
        estimate = search.estimate(probes, np.random.default_rng(seed), per_leaf, give_up_s=1e3 * max_time_s,
                                   time_limit_s=max_time_s / 4)
        _refuse_hopeless(space, max_time_s, estimate)
        began = time.perf_counter()
        search.reset(deadline=began + max_time_s)
        with phase(ctx.progress, f"branch and bound: strategies simulated (about {estimate.leaves:.3g})"):
            search.dfs(0, *search.start())
    except _OutOfTime:
        done = search.fraction_done()
        total = f"{max_time_s / done:.3g} s" if done > 0 else "far more"
        raise _too_large(space, max_time_s, f"{done:.2%} of the pruned tree in {max_time_s:g} s, so about "
                         f"{total} in all ({search.leaves} strategies simulated)") from None
    except KeyboardInterrupt:
        stopped = True                      # the incumbent so far (search.stopping)
    if not np.isfinite(search.ub) and not stopped:
        raise NothingFits("no strategy in the space fits the memory cap", expected=f"peak <= {cap / 2**30:.2f} GiB",
                          got="every strategy over it", hint="Use more devices or a smaller batch")
    peak = search.best_peak
    if not np.isfinite(peak):
        peak = Simulation(ctx.model, space.strategy(search.best)).run().peak_memory_bytes
    return ExhaustiveResult(search.best, search.ub, peak, search.nodes, search.leaves,
                            time.perf_counter() - began, estimate, space, stopped)


def _refuse_hopeless(space: ChoiceSpace, max_time_s: float, estimate: Estimate) -> None:
    """ExhaustiveTooLarge where Knuth's estimate says the search cannot finish in time."""
    if np.isnan(estimate.leaves) and not np.isnan(estimate.seconds):
        raise _too_large(space, max_time_s, f"at least {estimate.seconds:.3g} s: a single random walk down the "
                         f"pruned tree did not finish in {max_time_s / 4:g} s and implies "
                         f"{estimate.bound_evaluations:.3g} bound evaluations (Knuth's estimate)")
    if estimate.seconds > HOPELESS * max_time_s:
        raise _too_large(space, max_time_s, f"about {estimate.seconds:.3g} s ({estimate.leaves:.3g} strategies "
                         f"to simulate after pruning, {estimate.bound_evaluations:.3g} bound evaluations, "
                         f"Knuth's estimate)")


def _too_large(space: ChoiceSpace, max_time_s: float, got: str) -> ExhaustiveTooLarge:
    return ExhaustiveTooLarge(
        "exhaustive search cannot finish in time", expected=f"a search time <= max_time_s = {max_time_s:g} s",
        got=f"{got}, over a space of {space.size_text} strategies ({space.description})",
        hint="Restrict the space (space=SpaceOptions(allow_fewer_devices=False, max_axes=2), "
             "coarsen=True), raise max_time_s, or use algorithm='mcmc'")


@dataclass(frozen=True)
class ExhaustiveOptions:
    space: SpaceOptions = SpaceOptions()
    coarsen: bool = False
    runnable: bool = True
    max_time_s: float = 600.0
    probes: int = 20
    incumbent_proposals: int = 200
    seed: int = 0


def exhaustive(ctx, options: ExhaustiveOptions = ExhaustiveOptions()) -> Plan:
    """The least-time strategy that fits, simulated. Stopped by Ctrl-C: the incumbent (the best
    found so far), or data parallel while the first incumbent was being sought."""
    try:
        space = build_space(ctx, runnable_space(options.space, options.runnable), options.coarsen)
        result = exhaustive_search(ctx, space, options.max_time_s, options.probes, options.incumbent_proposals,
                                   options.seed)
    except KeyboardInterrupt:
        return fallback_plan(ctx, "the exhaustive search's first incumbent (MCMC)")
    details = {"space": result.space.description, "space_size": result.space.size, "nodes": result.nodes,
               "leaves_simulated": result.leaves, "search_time_s": result.elapsed_s,
               "estimated_leaves": result.estimate.leaves, "estimated_s": result.estimate.seconds}
    plan = make_plan(ctx, result.strategy, "exhaustive", details=details)
    if result.interrupted:
        return marked(plan, Interruption("the branch and bound", "the fastest strategy that fits found so far"))
    return plan
