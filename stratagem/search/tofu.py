"""Tofu's recursive partitioning (Tofu §5.2 and Appendix A): least total communication.

    nodes        coarsen(graph) (Tofu §5.1, `search.coarsen`): an op and its backward are one op
                 here already; elementwise and shape ops follow their producer; unrolled
                 timesteps reading one weight share one node
    factors      k = 2^m: m steps of 2; otherwise the prime factors of k, largest first, so that
                 k_i >= k_{i+1}                                                        `factors`
    basic plan   p: every node n picks one dim d_n of its anchor, split k ways (a node with no
                 dim that splits evenly and regularly replicates). Its cost c_k(p) is the bytes
                 of `tofu_cost.TofuCost` for the one-level configurations Level(d_n, k): what
                 each worker group fetches from the others for its input regions, the partial
                 sums it reduces, forward and backward, and the gradients of weights replicated
                 across the groups, all from the TDL regions (Tofu Lemma 1)         `step_problem`
    step i       on the graph whose tensors steps 1..i-1 have split, each of the K_{i-1} groups
                 holds 1/K_{i-1} of every tensor (Appendix A.1), so by Lemma 1 (cost linear in the
                 sizes) step i costs delta_i = K_{i-1} * c_{k_i}(p_i) / K_{i-1} = c_{k_i}(p_i)
                 (Eq. 3); p_i ranges over the basic plans whose dims still split the sub-graph
                 evenly: the prefix's levels plus Level(d_n, k_i) must be a valid nested
                 configuration                                                     `choices`
                 min_p c_{k_i}(p) is a min-sum problem over the coarsened graph, solved exactly
                 by Frontier Tracking with every memory zero (one objective: the frontier is the
                 single least-cost point)                                          `solve_step`
    plan         each op's levels, outermost = first step, as a stratagem Configuration, with
                 followers' configurations derived from their anchor's; simulated like any plan
                 The total is C(P) = sum_i delta_i.                                      `tofu`

Theorem 1, C(<p1, p2>) = C(<p2, p1>), and Theorems 2-3 (the recursion is optimal over all
sequences of basic plans) follow from Lemma 1 with A.1's sizes; the tests check both against
enumeration on graphs that meet Appendix A's assumptions (`sequence_bytes` prices any sequence).
The communication of the nested plan itself, every worker fetching for its own final region
(`TofuCost.total_bytes` of the final strategy, reported as `nested_bytes`), is not what Tofu
minimizes: there a dim split in two steps nests its chunks in step order, so swapping two steps
is no longer a relabeling of workers, and neither theorem holds (on a 3-layer MLP at 8 workers
the recursion then pays 311,296 bytes against 294,912 for the best sequence).

kwargs of `tofu` (and of `search(..., algorithm="tofu")`): `options=FTOptions(workers=1)`;
`runnable=True` keeps every step's dims to splits the runtime executes (False: any split whose
placements are regular; a step never splits a window's positions: `BASIC` keeps to regular
placements, so the halo splits the paper partitions with, which FT's space now has, are not
among Tofu's steps).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from stratagem.plan import Plan
from stratagem.search.coarsen import Group, coarsen
from stratagem.search.context import make_plan
from stratagem.search.ft import FTOptions, frontier_tracking
from stratagem.search.problem import CostProblem, EdgeCosts
from stratagem.search.progress import SILENT, Progress, phase
from stratagem.search.repeats import renamed, signature
from stratagem.search.space import member_configs
from stratagem.search.stopping import fallback_plan
from stratagem.search.tofu_cost import TofuCost
from stratagem.space import Configuration, Level, SpaceOptions
from stratagem.space.enumerate import is_valid
from stratagem.space.runnable import refusal

BASIC = SpaceOptions(allow_replicate=False, allow_irregular=False)


def factors(k: int) -> tuple[int, ...]:
    """Prime factors of k, largest first (all 2s for a power of two)."""
    out, n, p = [], k, 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return tuple(sorted(out, reverse=True))


@dataclass(frozen=True)
class TofuNode:
    group: Group
    weights: tuple[tuple[str, str], ...]       # (weight, first reader) fetched once per node


@dataclass(frozen=True)
class StepChoices:
    """Per node: the dims a step may split, the nested anchor configuration each gives, and every
    member's one-level (basic) configuration that prices it."""

    dims: tuple[tuple[str | None, ...], ...]
    nested: tuple[tuple[Configuration, ...], ...]
    members: tuple[dict[str, tuple[Configuration, ...]], ...]


class Tofu:
    def __init__(self, model, groups: tuple[Group, ...] | None = None, runnable: bool = False):
        self.model, self.cost, self.runnable = model, TofuCost(model), runnable
        groups = groups or coarsen(model.graph, model.analyses)
        self.nodes = tuple(TofuNode(g, tuple(self.cost.weights_read(g.members).items())) for g in groups)
        self.node_of = {op: n for n, node in enumerate(self.nodes) for op in node.group.members}
        self._structure = tuple(signature(model, g, (), ()) for g in groups)
        self._links = self._node_links()

    def _node_links(self) -> tuple[list[tuple], dict[tuple[int, int], list[tuple]]]:
        inner: list[tuple] = []
        between: dict[tuple[int, int], list[tuple]] = {}
        for t, p, q in self.cost.activation_edges:
            a, b = self.node_of[p], self.node_of[q]
            if a == b:
                inner.append((a, t, p, q))
            else:
                between.setdefault((min(a, b), max(a, b)), []).append((t, p, q))
        return inner, between

    # ---- one step -----------------------------------------------------------------------------
    def choices(self, prefix: tuple[tuple[Level, ...], ...], parts: int) -> StepChoices:
        """Per node, what a step may split; a node with the structure of an earlier one
        (search.repeats.signature) under the same prefix takes its choices, members by position."""
        dims, nested, members = [], [], []
        done: dict[tuple, int] = {}
        for n, (node, levels) in enumerate(zip(self.nodes, prefix)):
            key = (self._structure[n], levels)
            if key in done:
                twin = done[key]
                dims.append(dims[twin])
                nested.append(nested[twin])
                members.append(renamed(members[twin], self.nodes[twin].group, node.group))
                continue
            done[key] = n
            analysis = self.model.analyses[node.group.anchor]
            found = [d.name for d in analysis.dims
                     if d.splittable and is_valid(analysis, (*levels, Level(d.name, parts)), BASIC)
                     and self._runs(node.group, Configuration((*levels, Level(d.name, parts))))] or [None]
            dims.append(tuple(found))
            nested.append(tuple(Configuration((*levels, Level(d, parts))) for d in found))
            basic = [Configuration((Level(d, parts),)) for d in found]
            members.append(member_configs(self.model, node.group, basic))
        return StepChoices(tuple(dims), tuple(nested), tuple(members))

    def _runs(self, group: Group, anchor: Configuration) -> bool:
        """With `runnable`: every op of the node can run its configuration (space.runnable)."""
        if not self.runnable:
            return True
        derived = member_configs(self.model, group, [anchor])
        return all(refusal(self.model.analyses[op], configs[0], anchor.num_devices) is None
                   for op, configs in derived.items())

    def step_problem(self, choices: StepChoices) -> CostProblem:
        node_time = [np.zeros(len(d)) for d in choices.dims]
        for n, node in enumerate(self.nodes):
            for k in range(len(choices.dims[n])):
                for weight, reader in node.weights:
                    node_time[n][k] += self.cost.weight_bytes(weight, reader, choices.members[n][reader][k])
        inner, between = self._links
        for n, t, p, q in inner:
            for k in range(len(choices.dims[n])):
                m = choices.members[n]
                node_time[n][k] += self.cost.edge_bytes(t, p, m[p][k], q, m[q][k])
        edges = [self._edge_costs(choices, a, b, links) for (a, b), links in between.items()]
        return CostProblem(tuple(np.zeros_like(t) for t in node_time), tuple(node_time), tuple(edges),
                           tuple(node.group.anchor for node in self.nodes))

    def _edge_costs(self, choices: StepChoices, a: int, b: int, links) -> EdgeCosts:
        table = np.zeros((len(choices.dims[a]), len(choices.dims[b])))
        for t, p, q in links:
            for i in range(table.shape[0]):
                for j in range(table.shape[1]):
                    ends = {a: i, b: j}
                    src = choices.members[self.node_of[p]][p][ends[self.node_of[p]]]
                    dst = choices.members[self.node_of[q]][q][ends[self.node_of[q]]]
                    table[i, j] += self.cost.edge_bytes(t, p, src, q, dst)
        return EdgeCosts(a, b, np.zeros((1, *table.shape)), table[None], f"{a}-{b}")

    def solve_step(self, problem: CostProblem, options: FTOptions) -> tuple[tuple[int, ...], float, int]:
        result = frontier_tracking(problem, options)
        point = min(result.points, key=lambda p: p.time)
        return point.assignment, point.time, len(result.heuristic_fixes)

    # ---- the recursion ------------------------------------------------------------------------
    def run(self, num_workers: int, options: FTOptions = FTOptions(workers=1),
            progress: Progress = SILENT) -> "TofuResult":
        prefix = self.empty_prefix()
        steps = []
        with phase(progress, "Tofu's recursive steps", len(factors(num_workers))):
            for parts in factors(num_workers):
                choices = self.choices(prefix, parts)
                assignment, cost, fixes = self.solve_step(self.step_problem(choices), options)
                prefix = tuple(choices.nested[n][k].levels for n, k in enumerate(assignment))
                steps.append(TofuStep(parts, tuple(choices.dims[n][k] for n, k in enumerate(assignment)), cost, fixes))
                progress.advance()
        strategy = self.strategy(prefix)
        return TofuResult(strategy, sum(s.step_bytes for s in steps), steps=tuple(steps),
                          nested_bytes=self.cost.total_bytes(strategy, self.nodes_as_ops()))

    def empty_prefix(self) -> tuple[tuple[Level, ...], ...]:
        return tuple(() for _ in self.nodes)

    def sequence_bytes(self, sequence) -> float:
        """C(P) of a sequence of (parts, per-node dims) basic plans; raises if one is not valid
        after the steps before it."""
        prefix, total = self.empty_prefix(), 0.0
        for parts, dims in sequence:
            choices = self.choices(prefix, parts)
            assignment = [choices.dims[n].index(d) for n, d in enumerate(dims)]
            total += self.step_problem(choices).evaluate(assignment)[1]
            prefix = tuple(choices.nested[n][k].levels for n, k in enumerate(assignment))
        return total

    def strategy(self, prefix) -> dict[str, Configuration]:
        out: dict[str, Configuration] = {}
        for node, levels in zip(self.nodes, prefix):
            anchor = Configuration(levels)
            out.update((op, configs[0]) for op, configs in member_configs(self.model, node.group, [anchor]).items())
        return out

    def nodes_as_ops(self) -> tuple[tuple[str, ...], ...]:
        return tuple(node.group.members for node in self.nodes)


@dataclass(frozen=True)
class TofuStep:
    parts: int
    dims: tuple[str | None, ...]     # per node: the dim this step splits (None: replicated)
    step_bytes: float                # delta_i = c_{k_i}(p_i)
    heuristic_fixes: int


@dataclass(frozen=True)
class TofuResult:
    strategy: dict
    communication_bytes: float       # Tofu's objective, C(P) = sum_i delta_i
    steps: tuple[TofuStep, ...]
    nested_bytes: float              # every worker fetching for its final region (not minimized)


@dataclass(frozen=True)
class TofuOptions:
    ft: FTOptions = FTOptions(workers=1)      # solves each step's min-sum problem
    runnable: bool = True                     # keep to what stratagem.runtime executes


def tofu(ctx, options: TofuOptions = TofuOptions()) -> Plan:
    """Tofu's plan, simulated. Stopped by Ctrl-C: data parallel (a prefix of the steps places no
    op on every device)."""
    began = time.perf_counter()
    try:
        result = Tofu(ctx.model, runnable=options.runnable).run(ctx.num_devices, options.ft, ctx.progress)
    except KeyboardInterrupt:
        return fallback_plan(ctx, "Tofu's recursive steps")
    elapsed = time.perf_counter() - began
    details = {"tofu_bytes": result.communication_bytes, "nested_bytes": result.nested_bytes,
               "search_time_s": elapsed, "step_dims": [list(s.dims) for s in result.steps],
               "factors": list(factors(ctx.num_devices)),
               "step_bytes": [s.step_bytes for s in result.steps],
               "heuristic_fixes": sum(s.heuristic_fixes for s in result.steps)}
    return make_plan(ctx, result.strategy, "tofu", details=details)


__all__ = ["StepChoices", "Tofu", "TofuOptions", "TofuResult", "TofuStep", "factors", "tofu"]
