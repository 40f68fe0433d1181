"""A cost problem in TensorOpt's additive form (§2.1, Eq. 1-3), independent of where costs come from.

Node i (an operator, or a group of operators sharing one configuration) has K_i configurations
with operator costs (m_ik, t_ik). Edge e = (i, j) (a tensor from i to j) has, for every pair of
configurations (k, p), R_e options (tensor reuse: keep the copy before, after, or both), each with
costs (m_ekpr, t_ekpr). A strategy picks one configuration per node and one option per edge:

    t(S) = sum_i t_{i,k_i} + sum_e t_{e,k_i,k_j,r_e}        m(S) = sum_i m_{i,k_i} + sum_e m_{e,...}

and, beside the sums, what lives only while one op runs (cost.transient): a transient term per node
configuration and per edge option, of which a strategy's peak memory adds the largest:

    peak(S) = m(S) + max( max_i T_{i,k_i}, max_e T_{e,k_i,k_j,r_e} )

A problem without transient terms (all zero) is TensorOpt's additive problem.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from stratagem.errors import StratagemError


@dataclass(frozen=True)
class EdgeCosts:
    src: int
    dst: int
    mem: np.ndarray        # [R, K_src, K_dst]
    time: np.ndarray       # [R, K_src, K_dst]
    name: str = ""
    transient: np.ndarray | None = None   # [R, K_src, K_dst]; None: no transient memory


@dataclass(frozen=True)
class CostProblem:
    node_mem: tuple[np.ndarray, ...]     # per node: [K_i]
    node_time: tuple[np.ndarray, ...]    # per node: [K_i]
    edges: tuple[EdgeCosts, ...] = ()
    names: tuple[str, ...] = field(default=())
    node_transient: tuple[np.ndarray, ...] = ()   # per node: [K_i]; (): none

    def __post_init__(self) -> None:
        mem = tuple(np.asarray(m, dtype=np.float64) for m in self.node_mem)
        time = tuple(np.asarray(t, dtype=np.float64) for t in self.node_time)
        object.__setattr__(self, "node_mem", mem)
        object.__setattr__(self, "node_time", time)
        if not self.names:
            object.__setattr__(self, "names", tuple(f"n{i}" for i in range(len(mem))))
        for i, (m, t) in enumerate(zip(mem, time)):
            if m.shape != t.shape or m.ndim != 1 or len(m) == 0:
                raise StratagemError(f"node {self.names[i]} costs malformed",
                                     expected="two equal 1-D arrays with at least one config",
                                     got=f"shapes {m.shape} and {t.shape}")
        transient = tuple(np.asarray(t, dtype=np.float64) for t in self.node_transient)
        object.__setattr__(self, "node_transient", transient)
        if transient and tuple(t.shape for t in transient) != tuple(m.shape for m in mem):
            raise StratagemError("node transient memory malformed", expected="one [K_i] array per node",
                                 got=f"shapes {[t.shape for t in transient]}")
        sizes = self.num_configs
        for e in self.edges:
            want = (sizes[e.src], sizes[e.dst])
            if e.mem.shape[1:] != want or e.time.shape != e.mem.shape or e.src == e.dst \
                    or (e.transient is not None and e.transient.shape != e.mem.shape):
                raise StratagemError(f"edge {e.name or (e.src, e.dst)} costs malformed",
                                     expected=f"[R, {want[0]}, {want[1]}] between two distinct nodes",
                                     got=f"{e.mem.shape} between {e.src} and {e.dst}")

    @property
    def num_nodes(self) -> int:
        return len(self.node_mem)

    @property
    def has_transient(self) -> bool:
        return bool(self.node_transient) or any(e.transient is not None for e in self.edges)

    def transient_values(self) -> np.ndarray:
        """Every distinct transient term, ascending (the thresholds search.ft_peak tries), found
        once per problem (the planner's second FT run asks again); read-only."""
        found = self.__dict__.get("_transient_values")
        if found is None:
            arrays = list(self.node_transient) + [e.transient for e in self.edges if e.transient is not None]
            distinct = {id(a): a for a in arrays}                # repeated layers may share their arrays
            values = np.concatenate([np.unique(a) for a in distinct.values()]) if distinct else np.zeros(1)
            found = np.unique(np.concatenate([values[np.isfinite(values)], [0.0]]))   # each array's few values first
            found.flags.writeable = False
            object.__setattr__(self, "_transient_values", found)
        return found

    def within(self, threshold: float) -> "CostProblem":
        """The additive problem of the strategies whose every transient term is at most
        `threshold`: node configurations and edge options above it cost +inf memory."""
        masked: dict[tuple[int, int], np.ndarray] = {}     # arrays shared (repeated layers) stay shared

        def mask(transient: np.ndarray | None, mem: np.ndarray) -> np.ndarray:
            if transient is None:
                return mem
            key = (id(transient), id(mem))
            if key not in masked:              # unmasked: the same array (tables.Memo knows it by id)
                above = transient > threshold
                masked[key] = np.where(above, np.inf, mem) if above.any() else mem
            return masked[key]

        node_mem = tuple(mask(t, m) for t, m in zip(self.node_transient or [None] * len(self.node_mem), self.node_mem))
        edges = tuple(EdgeCosts(e.src, e.dst, mask(e.transient, e.mem), e.time, e.name) for e in self.edges)
        return CostProblem(node_mem, self.node_time, edges, self.names)

    def transient_of(self, assignment: Sequence[int], options: Sequence[int] | None = None) -> float:
        """max of the strategy's transient terms."""
        options = options if options is not None else [0] * len(self.edges)
        found = max((float(t[k]) for t, k in zip(self.node_transient, assignment)), default=0.0)
        for e, r in zip(self.edges, options):
            if e.transient is not None:
                found = max(found, float(e.transient[r, assignment[e.src], assignment[e.dst]]))
        return found

    @property
    def num_configs(self) -> tuple[int, ...]:
        return tuple(len(m) for m in self.node_mem)

    def evaluate(self, assignment: Sequence[int], options: Sequence[int] | None = None) -> tuple[float, float]:
        """(peak memory, time) of a strategy: Eq. 3's sums, plus the largest transient term."""
        options = options if options is not None else [0] * len(self.edges)
        mem = sum(float(self.node_mem[i][k]) for i, k in enumerate(assignment))
        time = sum(float(self.node_time[i][k]) for i, k in enumerate(assignment))
        for e, r in zip(self.edges, options):
            k, p = assignment[e.src], assignment[e.dst]
            mem += float(e.mem[r, k, p])
            time += float(e.time[r, k, p])
        return mem + self.transient_of(assignment, options), time

    def all_strategies(self):
        """Every (assignment, options) pair: the brute-force search space."""
        configs = [range(k) for k in self.num_configs]
        opts = [range(e.mem.shape[0]) for e in self.edges]
        for assignment in itertools.product(*configs):
            for options in itertools.product(*opts):
                yield assignment, options
