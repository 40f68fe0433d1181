"""Frontier Tracking (TensorOpt §3.2, Algorithms 2 and 3).

Input: a `CostProblem` (nodes with per-configuration costs, edges with per-pair costs). Output:
every strategy on the (memory, time) frontier, each unrolled to a configuration per node.

    initialize node tables N_i[k] and edge tables E_ij[k, p]          (`_State.__init__`)
    loop:
        mark the linear chain: from the first node, while the last marked node has exactly one
        other neighbor, mark it                                        (`_State.extend_marks`)
        exact eliminations of unmarked nodes, in rounds (the nodes of degree <= 2 when a round
        starts, each if it still qualifies, or instead a neighbor that also qualifies whose
        elimination builds fewer candidates), any that applies:        (`_State.try_exact`)
            edge elimination   E_ij = E1_ij (x) E2_ij                                  Eq. 5
            node elimination   E_hj[w,p] = reduce U_k E_hi[w,k] (x) N_i[k] (x) E_ij[k,p]  Eq. 4
            leaf elimination   N_j[p] = N_j[p] (x) reduce U_k N_i[k] (x) E_ij[k,p]
                               (node elimination of a node with one neighbor)
        else branch elimination: merge node i into neighbor h, configurations (p, k), when
            K_h * K_i <= branch_limit                                  Eq. 6 (`_branch`)
        else heuristic elimination: fix the configuration of the unmarked node of highest degree,
            fold its edges into its neighbors                          Eq. 7 (`_heuristic`)
            (with `relax`, split the node instead: each of its C edges folds its own copy of the
            node, with 1/C of its costs, into its other end, every copy free to take its own
            configuration: a relaxation whose frontier bounds the exact one from below,
            search.ft_bound)
            (a `prefer` assignment, e.g. data parallel's, picks the fixed configurations instead:
            the planner runs such a second pass and keeps the union's frontier, so that a baseline
            inside the space is never lost to a heuristic pick)
    linear DP over each marked chain:                                  Algorithm 3 (`_ldp`)
        CF_1 = N_1;  CF_i[p] = reduce U_k CF_{i-1}[k] (x) E_{i-1,i}[k,p] (x) N_i[p]
    product of the chains' and fixed nodes' frontiers, then unroll every point   (`unroll_all`)

The graph is treated as undirected: every elimination is exact for pairwise costs whatever the
edge direction, and in any order. Combines are remembered by their terms' keys (`tables.Memo`,
shared by the peak passes): the blocks of a repeated stack, reduced round by round on their own
tables, reuse the first block's results. Node and leaf eliminations are special cases of `tables.combine`, which keeps for
every frontier tuple the choices that produced it; nothing is recomputed to unroll. Chunks of a
combine run on a thread pool (TensorOpt's multi-threading: configurations of one node are
independent); numpy releases the GIL in the sorts that dominate.
"""

from __future__ import annotations

import contextlib
import time as _time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from stratagem.search.problem import CostProblem
from stratagem.search.progress import SILENT, Progress, phase
from stratagem.search.tables import (
    Combined, EdgeLeaf, Memo, NodeLeaf, Reindexed, Table, Term, Transposed, combine, digest, unroll_all,
)

O0, O1 = ("o", 0), ("o", 1)
SAME_TIME = 1e-12     # relative: float sums of one strategy's costs in different orders differ by less


@dataclass(frozen=True)
class FTOptions:
    branch_limit: int = 256         # largest K_h * K_i a branch elimination may create
    hub_span: int | None = None     # > 0: first fix nodes with edges spanning more nodes than this
    workers: int = 2                # threads for large combines
    memory_resolution: float = 0.0  # > 0: memories within this relative step count as equal
    max_width: int | None = None    # > 0: frontiers thinned to this many tuples (approximate)
    peak_passes: int | None = None  # > 0: at most this many FT passes over peak thresholds
                                    # (search.ft_peak; approximate when thresholds remain)
    relax: bool = False             # heuristic eliminations split a node per edge instead of fixing
                                    # it, and frontiers are thinned from below (tables.lowered_rows):
                                    # a lower bound, not strategies (search.ft_bound)

    @property
    def exact(self) -> bool:
        return self.memory_resolution == 0 and self.max_width is None and self.peak_passes is None


@dataclass(frozen=True)
class HeuristicFix:
    node: int
    config: int
    reason: str


@dataclass(frozen=True)
class FTPoint:
    mem: float
    time: float
    assignment: tuple[int, ...]
    options: tuple[int, ...]


@dataclass(frozen=True)
class FTResult:
    points: tuple[FTPoint, ...]
    heuristic_fixes: tuple[HeuristicFix, ...] = ()
    stats: dict = field(default_factory=dict)

    @property
    def pairs(self) -> list[tuple[float, float]]:
        return [(p.mem, p.time) for p in self.points]


class Flattened(Table):
    """A node merged by branch elimination: index q = p * K_i + k of a [K_h, K_i] table."""

    def __init__(self, child: Table):
        self.child = child
        kh, ki, width = child.mem.shape
        self.inner = ki
        self.mem, self.time = child.mem.reshape(kh * ki, width), child.time.reshape(kh * ki, width)

    @property
    def key(self) -> bytes:
        return digest("flattened", self.child.key)

    def expand(self, index, slot):
        yield (self.child, divmod(index[0], self.inner), slot)

    def children(self):
        return (self.child,)


class Scaled(Table):
    """A table's costs times `factor` (a split node's share, `_State._split`); unrolls as the table."""

    def __init__(self, child: Table, factor: float):
        self.child, self.factor = child, factor
        self.mem, self.time = child.mem * factor, child.time * factor

    @property
    def key(self) -> bytes:
        return digest("scaled", self.child.key, self.factor)

    def expand(self, index, slot):
        yield (self.child, index, slot)

    def children(self):
        return (self.child,)


class _State:
    def __init__(self, problem: CostProblem, options: FTOptions, executor,
                 prefer: tuple[int, ...] | None = None, memo: Memo | None = None):
        self.problem, self.options, self.executor, self.prefer = problem, options, executor, prefer
        self.nodes: dict[int, Table] = {i: NodeLeaf(i, problem.node_mem[i], problem.node_time[i])
                                         for i in range(problem.num_nodes)}
        self.edges: dict[tuple[int, int], list[Table]] = {}
        self.parallel: dict[tuple[int, int], None] = {}    # keys of `edges` holding more than one table
        self.adjacent: dict[int, dict[int, None]] = {i: {} for i in range(problem.num_nodes)}
        self.memo = Memo() if memo is None else memo   # repeated layers reduce once (tables.Memo)
        reduced: dict[tuple[int, int], tuple] = {}      # by the arrays' ids: edges of repeated layers share them
        for e, costs in enumerate(problem.edges):
            ids = (id(costs.mem), id(costs.time))
            if ids not in reduced:
                reduced[ids] = self.memo.edge_options(costs.mem, costs.time)
            self.add_edge(costs.src, costs.dst, EdgeLeaf(e, costs.mem, costs.time, reduced[ids]))
        self.chains: list[list[int]] = []
        self.constants: list[Table] = []
        self.fixes: list[HeuristicFix] = []
        self.counts = {"edge": 0, "node": 0, "leaf": 0, "branch": 0, "heuristic": 0, "split": 0}
        self.left = problem.num_nodes           # nodes not yet reported eliminated (`newly_eliminated`)
        self.round: list[int] = []              # try_exact's nodes left in this round, last first

    def combine(self, terms: list[Term], out_sizes: tuple[int, ...], k_size: int | None = None,
                threads: bool = True) -> Table:
        """tables.combine with this run's limits and memo. Relaxed (`relax`), frontiers with an
        index are thinned from below, and one with none (a component's, the last product) is kept
        whole: it is one row."""
        width = None if self.options.relax and not out_sizes else self.options.max_width
        return combine(terms, out_sizes, k_size, executor=self.executor if threads else None,
                       resolution=self.options.memory_resolution, max_width=width,
                       memo=self.memo, lowered=self.options.relax)

    # ---- graph views --------------------------------------------------------------------------
    def size(self, i: int) -> int:
        return self.nodes[i].index_shape[0]

    def neighbors(self, i: int) -> set[int]:
        """The nodes an edge joins to i (`adjacent` keeps, per node, its edges' other ends in the
        order their keys entered `edges`, so the set is built as a scan of `edges` would build it)."""
        return {j for j in self.adjacent.get(i, ())}   # noqa: C416 - one by one, as the scan grew it

    def newly_eliminated(self) -> int:
        """Nodes eliminated since the last call (a branch elimination merges two nodes into one)."""
        count, self.left = self.left - len(self.nodes), len(self.nodes)
        return count

    def marked(self) -> set[int]:
        return {n for chain in self.chains for n in chain}

    def edge(self, a: int, b: int) -> Table:
        """The (merged) edge table oriented [K_a, K_b]."""
        key = (min(a, b), max(a, b))
        tables = self.edges[key]
        if len(tables) > 1:
            self._merge_parallel(key)
            tables = self.edges[key]
        return tables[0] if a < b else Transposed(tables[0])

    def _merge_parallel(self, key: tuple[int, int]) -> None:
        tables = self.edges[key]
        sizes = tables[0].index_shape
        merged = tables[0]
        for other in tables[1:]:
            merged = self.combine([Term(merged, (O0, O1)), Term(other, (O0, O1))], sizes)
            self.counts["edge"] += 1
        self.edges[key] = [merged]
        self.parallel.pop(key, None)

    def add_edge(self, a: int, b: int, table: Table) -> None:
        if a > b:
            table, a, b = Transposed(table), b, a
        if (a, b) not in self.edges:
            self.adjacent.setdefault(a, {})[b] = None
            self.adjacent.setdefault(b, {})[a] = None
        tables = self.edges.setdefault((a, b), [])
        tables.append(table)
        if len(tables) > 1:
            self.parallel[(a, b)] = None

    def remove_node(self, i: int) -> None:
        del self.nodes[i]
        for j in self.adjacent.pop(i, {}):
            del self.edges[(min(i, j), max(i, j))]
            self.parallel.pop((min(i, j), max(i, j)), None)
            self.adjacent.get(j, {}).pop(i, None)

    # ---- marking ------------------------------------------------------------------------------
    def extend_marks(self) -> None:
        marked = self.marked()
        if not self.chains or not self._has_room(self.chains[-1]):
            start = self._unmarked_component_start(marked)
            if start is None:
                return
            self.chains.append([start])
            marked.add(start)
        chain = self.chains[-1]
        while True:
            last = chain[-1]
            others = self.neighbors(last) - ({chain[-2]} if len(chain) > 1 else set())
            if len(others) != 1:
                return
            (nxt,) = others
            if nxt in marked:
                return
            chain.append(nxt)
            marked.add(nxt)

    def _has_room(self, chain: list[int]) -> bool:
        """Whether the chain's last node still has unmarked neighbors to grow into."""
        return bool(self.neighbors(chain[-1]) - self.marked())

    def _unmarked_component_start(self, marked: set[int]) -> int | None:
        """First node (by index) of a component with no marked node."""
        seen: set[int] = set()
        for start in sorted(self.nodes):
            if start in seen:
                continue
            component, stack = set(), [start]
            while stack:
                n = stack.pop()
                if n in component:
                    continue
                component.add(n)
                stack.extend(self.neighbors(n) - component)
            seen |= component
            if not component & marked:
                return start
        return None

    def is_done(self) -> bool:
        marked = self.marked()
        if set(self.nodes) != marked:
            return False
        for chain in self.chains:
            for pos, n in enumerate(chain):
                allowed = {chain[pos - 1]} if pos else set()
                if pos + 1 < len(chain):
                    allowed.add(chain[pos + 1])
                if self.neighbors(n) - allowed:
                    return False
        return True

    # ---- exact eliminations -------------------------------------------------------------------
    def try_exact(self) -> bool:
        """One exact elimination, taken in rounds: the nodes of degree <= 2 when a round starts, in
        index order, each if it still qualifies. Every block of a repeated stack is thus reduced
        on its own tables before any elimination joins it to its neighbors, so identical blocks
        meet identical tables (tables.Memo) instead of an accumulation of the blocks before."""
        for key in list(self.parallel):
            self._merge_parallel(key)
        marked = self.marked()
        for _ in range(2):
            while self.round:
                i = self.round.pop()
                if i in self.nodes and i not in marked and len(self.adjacent[i]) <= 2:
                    self._eliminate_exactly(self._cheapest_near(i, marked))
                    return True
            self.round = sorted((i for i in self.nodes if i not in marked and len(self.adjacent[i]) <= 2),
                                reverse=True)
        return False

    def _cheapest_near(self, i: int, marked: set[int]) -> int:
        """i, or a neighbor of i that an exact elimination also removes now and whose elimination
        builds fewer candidates (`_candidates`; i on a tie). Around a triangle i-h-j, eliminating
        i costs K_h K_i K_j W_hi W_ij, eliminating h K_i K_h K_j W_hi W_hj: which is cheaper
        depends on which edges earlier eliminations widened. Twins decide alike (sizes and widths)."""
        options = [i, *sorted(n for n in self.adjacent[i] if n not in marked and len(self.adjacent[n]) <= 2)]
        return min(options, key=self._candidates)

    def _candidates(self, i: int) -> int:
        """The candidates eliminating i builds: K_h K_i K_j times the widths of its edges' tables
        and its own (a node elimination; a leaf's and an isolated node's likewise, without j or h)."""
        count = self.size(i) * self.nodes[i].width
        for n in self.adjacent[i]:
            count *= self.size(n) * self.edge(i, n).width
        return count

    def _eliminate_exactly(self, i: int) -> bool:
        nbrs = self.neighbors(i)
        if len(nbrs) == 0:
            self._isolated(i)
        elif len(nbrs) == 1:
            self._leaf(i, next(iter(nbrs)))
        elif len(nbrs) == 2:
            h, j = sorted(nbrs)
            self._node(i, h, j)
        else:
            return False
        return True

    def _isolated(self, i: int) -> None:
        self.constants.append(self.combine([Term(self.nodes[i], ("k",))], (), self.size(i), threads=False))
        self.remove_node(i)
        self.counts["leaf"] += 1

    def _leaf(self, i: int, j: int) -> None:
        """N_j[p] = N_j[p] (x) reduce U_k N_i[k] (x) E_ij[k, p]: the union over k visited without
        building (or thinning) a frontier per (p, k) first."""
        folded = self.combine([Term(self.nodes[i], ("k",)), Term(self.edge(i, j), ("k", O0))],
                              (self.size(j),), self.size(i))
        self.nodes[j] = self.combine([Term(self.nodes[j], (O0,)), Term(folded, (O0,))], (self.size(j),))
        self.remove_node(i)
        self.counts["leaf"] += 1

    def _node(self, i: int, h: int, j: int) -> None:
        inner = self.combine([Term(self.nodes[i], (O0,)), Term(self.edge(i, j), (O0, O1))],
                             (self.size(i), self.size(j)))
        table = self.combine([Term(self.edge(h, i), (O0, "k")), Term(inner, ("k", O1))],
                             (self.size(h), self.size(j)), self.size(i))
        self.remove_node(i)
        self.add_edge(h, j, table)
        self.counts["node"] += 1

    # ---- inexact or expensive eliminations ----------------------------------------------------
    def try_branch(self) -> bool:
        marked = self.marked()
        best = None
        for i in self.nodes:
            if i in marked:
                continue
            for h in self.neighbors(i):
                product = self.size(i) * self.size(h)
                if product <= self.options.branch_limit and (best is None or product < best[0]):
                    best = (product, i, h)
        if best is None:
            return False
        self._branch(best[1], best[2])
        return True

    def _branch(self, i: int, h: int) -> None:
        """Merge node i into h: h's configurations become pairs (p, k)."""
        ki, kh = self.size(i), self.size(h)
        pair = self.combine([Term(self.nodes[h], (O0,)), Term(self.nodes[i], (O1,)),
                             Term(self.edge(h, i), (O0, O1))], (kh, ki))
        outer, inner = np.repeat(np.arange(kh), ki), np.tile(np.arange(ki), kh)
        moved = []
        for x in self.neighbors(h) - {i}:
            moved.append((x, Reindexed(self.edge(h, x), 0, outer)))
        for x in self.neighbors(i) - {h}:
            moved.append((x, Reindexed(self.edge(i, x), 0, inner)))
        self.remove_node(i)
        self.remove_node(h)
        self.nodes[h] = Flattened(pair)
        for x, table in moved:
            self.add_edge(h, x, table)
        self.counts["branch"] += 1

    def heuristic(self) -> None:
        """Fix the configuration of the unmarked node with most neighbors (TensorOpt Eq. 7)."""
        marked = self.marked()
        candidates = [i for i in self.nodes if i not in marked]
        self._fix_or_split(max(candidates, key=lambda n: (len(self.neighbors(n)), -n)))

    def fix_hubs(self, span: int) -> None:
        """Heuristic elimination of the nodes with edges that span more than `span` nodes of the
        topological order (a tied embedding, an encoder output read by every decoder layer,
        BERT's attention mask): while any remain, fix the node with the most such edges. These
        edges tie distant parts of the graph, so no linear chain forms around them."""
        while True:
            long_edges = {i: sum(abs(i - j) > span for j in self.neighbors(i)) for i in self.nodes}
            worst = max(long_edges, key=lambda n: (long_edges[n], len(self.neighbors(n)), -n), default=None)
            if worst is None or long_edges[worst] == 0:
                return
            self._fix_or_split(worst, f"edges spanning more than {span} nodes")

    def _fix_or_split(self, i: int, why: str = "") -> None:
        if self.options.relax:
            self._split(i)
        else:
            self._fix(i, why)

    def _split(self, i: int) -> None:
        """The relaxation of Eq. 7 (weighted mini-bucket elimination, Dechter and Rish 2003; Liu
        and Ihler 2011): each of i's C edges folds its own copy of i into its other end, the copy
        carrying 1/C of i's own costs, N_x[p] = N_x[p] (x) reduce U_k (N_i[k] / C) (x) E_xi[p, k].
        A strategy of the graph is one of the split graph's (every copy alike) at the same cost,
        so every point of the exact frontier has one of the split graph's frontier no worse in
        memory and time. Points' assignments are no strategies (each copy chose for itself)."""
        neighbors = sorted(self.neighbors(i))
        share = Scaled(self.nodes[i], (1.0 - 1e-9) / max(len(neighbors), 1))   # C shares, rounded: never past it
        for x in neighbors:
            folded = self.combine([Term(share, ("k",)), Term(self.edge(i, x), ("k", O0))], (self.size(x),),
                                  self.size(i))
            self.nodes[x] = self.combine([Term(self.nodes[x], (O0,)), Term(folded, (O0,))], (self.size(x),))
        if not neighbors:                               # i is a constant
            self.constants.append(self.combine([Term(share, ("k",))], (), self.size(i), threads=False))
        self.remove_node(i)
        self.counts["split"] += 1

    def _fix(self, i: int, why: str = "") -> None:
        config, reason = self._pick_config(i)
        reason = f"{why}; {reason}" if why else reason
        for x in self.neighbors(i):
            self.nodes[x] = self.combine([Term(self.nodes[x], (O0,)), Term(self.edge(x, i), (O0, config))],
                                         (self.size(x),))
        self.constants.append(self.combine([Term(self.nodes[i], (config,))], (), threads=False))
        self.fixes.append(HeuristicFix(i, config, reason))
        self.remove_node(i)
        self.counts["heuristic"] += 1

    def _pick_config(self, i: int) -> tuple[int, str]:
        """The configuration with the least normalized time + memory, looking one step ahead: its
        own best tuple plus, for every neighbor x, the best over x's configurations of the edge
        and x's own costs (what fixing it will cost its neighbors at best); or the preferred one."""
        if self.prefer is not None:
            return self.prefer[i], "the preferred assignment's configuration"
        node = self.nodes[i]
        tables = [node] + [self.nodes[x] for x in self.neighbors(i)]
        t_scale = max(max(_finite_max(t.time) for t in tables), 1e-30)
        m_scale = max(max(_finite_max(t.mem) for t in tables), 1e-30)
        score = np.min(node.time / t_scale + node.mem / m_scale, axis=-1)
        for x in self.neighbors(i):
            edge = np.min(self.edge(i, x).time / t_scale + self.edge(i, x).mem / m_scale, axis=-1)
            other = np.min(self.nodes[x].time / t_scale + self.nodes[x].mem / m_scale, axis=-1)
            score = score + np.min(edge + other[None, :], axis=1)
        config = int(np.argmin(score))
        return config, "least normalized time + memory with its neighbors' best responses"

    # ---- linear DP and the final product ------------------------------------------------------
    def ldp(self, chain: list[int]) -> Table:
        cf = self.nodes[chain[0]]
        for prev, cur in zip(chain, chain[1:]):
            cf = self.combine([Term(cf, ("k",)), Term(self.edge(prev, cur), ("k", O0)),
                               Term(self.nodes[cur], (O0,))], (self.size(cur),), self.size(prev))
        return self.combine([Term(cf, ("k",))], (), cf.index_shape[0], threads=False)

    def final(self) -> Table:
        parts = [self.ldp(chain) for chain in self.chains] + self.constants
        result = parts[0]
        for other in parts[1:]:
            result = self.combine([Term(result, ()), Term(other, ())], (), threads=False)
        return result


def frontier_tracking(problem: CostProblem, options: FTOptions = FTOptions(),
                      prefer: tuple[int, ...] | None = None, progress: Progress = SILENT,
                      name: str = "FT eliminations", memo: Memo | None = None) -> FTResult:
    """The exact (memory, time) frontier of `problem`, unless heuristic eliminations were needed
    (they fix nodes at `prefer`'s configurations when given). `progress` is told phase `name`
    in nodes: one done as it is eliminated, the linear chains' when the DP over them ends.
    `memo` (tables.Memo) may carry reductions over from an earlier run on a related problem (a
    peak pass of the same tables with some configurations masked)."""
    start = _time.perf_counter()
    reused_before, computed_before = (memo.reused, memo.computed) if memo is not None else (0, 0)
    with _pool(options.workers) as pool, phase(progress, name, problem.num_nodes):
        state = _State(problem, options, pool, prefer, memo)
        if options.hub_span:
            state.fix_hubs(options.hub_span)
        while True:
            progress.advance(state.newly_eliminated())
            state.extend_marks()
            if state.is_done():
                break
            if state.try_exact():
                continue
            state.extend_marks()
            if state.is_done():
                break
            if not state.try_branch():
                state.heuristic()
        table = state.final()
        progress.advance(state.newly_eliminated() + len(state.nodes))
    slots = [slot for slot in range(table.width) if np.isfinite(table.mem[slot])]
    points = [FTPoint(float(table.mem[slot]), float(table.time[slot]),
                      tuple(nodes[i] for i in range(problem.num_nodes)),
                      tuple(opts.get(e, 0) for e in range(len(problem.edges))))
              for slot, (nodes, opts) in zip(slots, unroll_all(table, (), slots))]
    stats = dict(state.counts, reused=state.memo.reused - reused_before,
                 computed=state.memo.computed - computed_before, chains=[len(c) for c in state.chains],
                 exact=(options.memory_resolution == 0 and options.max_width is None and not state.fixes
                        and not state.counts["split"]),
                 seconds=_time.perf_counter() - start)
    return FTResult(tuple(points), tuple(state.fixes), stats)


def merged(first: FTResult, second: FTResult) -> FTResult:
    """The frontier of the union of two results' points (memory ascending, time descending).
    Times equal but for summation order (the same costs added in another order by another pass,
    within `SAME_TIME` relative) count as equal: the leaner point stays."""
    points, best = [], float("inf")
    for p in sorted(first.points + second.points, key=lambda p: (p.mem, p.time)):
        if best == float("inf") or p.time < best - SAME_TIME * abs(best):
            points.append(p)
            best = p.time
    stats = dict(first.stats, seconds=first.stats.get("seconds", 0) + second.stats.get("seconds", 0),
                 passes=first.stats.get("passes", 1) + second.stats.get("passes", 1),
                 exact=bool(first.stats.get("exact")) and bool(second.stats.get("exact")))
    stopped = first.stats.get("interrupted") or second.stats.get("interrupted")
    if stopped:                     # a Ctrl-C stopped one of them (search.ft_peak)
        stats["interrupted"] = stopped
    return FTResult(tuple(points), first.heuristic_fixes + second.heuristic_fixes, stats)


def _finite_max(a: np.ndarray) -> float:
    finite = a[np.isfinite(a)]
    return float(finite.max()) if finite.size else 0.0


@contextlib.contextmanager
def _pool(workers: int) -> Iterator[ThreadPoolExecutor | None]:
    """Threads for large combines (none for one worker); on the way out, a combine's boxes not
    started yet are dropped, so a Ctrl-C waits only for the ones running."""
    if workers <= 1:
        yield None
        return
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


__all__ = ["FTOptions", "FTPoint", "FTResult", "HeuristicFix", "frontier_tracking", "Combined", "Memo"]
