"""Per-op transient terms in FT's pairwise problem (cost.transient):

    T_q = max( own_q + sum_e L_e,  sum_e H_e + max_e (P_e - H_e) - made_q ) - later_q

(made_q per q's configuration, later_q per op: cost.made). FT's problem has node and edge terms only (search.problem). An op q of group g reads

    known inputs     from a member of g, or from the data loader: (L, H, P) depend on g's index
    crossing inputs  from another group h: (L, H, P) depend on (k_h, k_g, r_e)

so that
    node term of g     = max over members q of T_q over its known inputs                (per k_g)
    one crossing input e: its edge term is T_q over e and the known inputs               (exact)
    several: e_1, the one whose P varies most, carries the term; every other e_j whose (L, H, P)
        varies with the source adds a digit a_j to g's index (k'' = k' * L + l, mixed radix over
        the digits); under a_j, e_j may only take options with (L, H, P) <= V_j[k', a_j]
        componentwise (the others cost +inf memory on e_j) and e_1's term counts e_j as V_j[k', a_j];
        V_j[k', .] are e_j's distinct (L, H, P) at k'.
    an e_j whose (L, H, P) does not vary with the source counts as a known input.

T_q grows with every L, H and P. For every strategy, the digit whose V_j is its own (L, H, P) is
allowed and exact, others forbid or overcharge: the least over digits, which FT's frontier keeps
(digits change memory, never time), is the exact peak. Triples within `LEVEL_TOLERANCE` of the
op's largest input P of each other share a digit (a batch norm's statistics, a few KiB whatever
their layout, add no digit), and past `MAX_LEVELS` runs for one input, or `MAX_LEVELS_PER_GROUP`
digit combinations for one group, neighbouring runs merge: a digit then stands for the
componentwise largest of its run, so FT overcharges those strategies (by at most the tolerance
when only it merged), never undercharges, and every plan's reported memory is the cost model's
own (cost.transient).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from stratagem.cost.transient import input_transient_bytes, op_term, op_transient_bytes
from stratagem.search.problem import EdgeCosts

MAX_LEVELS = 2              # digit values of one crossing input at most
MAX_LEVELS_PER_GROUP = 4    # digit combinations a group's index grows by at most (FT's time grows with it)
LEVEL_TOLERANCE = 0.005     # triples closer than this share of the op's largest input P share a digit


@dataclass(frozen=True)
class Known:
    """own_q, made_q and the (L, H, P) of q's inputs known from its group's index (vectors or
    arrays); later_q is the op's, not its index's (twins share their Known, not their later_q)."""
    own: np.ndarray
    inputs: tuple[tuple, ...] = ()
    made: np.ndarray | float = 0.0

    def plus(self, phases) -> "Known":
        return Known(self.own, self.inputs + (tuple(phases),), self.made)

    def term(self, later: float) -> np.ndarray:
        return op_term(self.own, self.inputs, self.made, later)


@dataclass(frozen=True)
class Level:
    """One digit of a group's index: the crossing input it bounds and the edge carrying the term."""
    edge: int              # problem edge of the bounded input e_j
    carrier: int           # problem edge e_1 whose term counts e_j at its digit's triple
    values: np.ndarray     # [K', A, 3]: V_j per index of the group (before levels) and digit
    phases: np.ndarray     # [3, R, K_src', K']: e_j's (L, H, P), on indices before levels


@dataclass(frozen=True)
class Carrier:
    """The edge carrying op q's term: its own (L, H, P), q's known inputs and q's later_q."""
    phases: np.ndarray     # [3, R, K_src', K']
    known: Known           # vectors [K']
    later: float = 0.0


def member_inputs(model, group, members: Mapping[str, Sequence], n: int, flags, inner) -> dict[str, Known]:
    """Per member q, own_q and the (L, H, P) of its `inner` inputs, per index k * 2^len(flags) + f:
    an inner edge of a flagged tensor (search.flags) counts the producer's buffer as kept when
    its bit is set."""
    num_flags = 1 << len(flags)
    bit_of = {s.tensor: bit for bit, s in enumerate(flags)}
    found = {name: Known(np.repeat([op_transient_bytes(model, name, c) for c in members[name]], num_flags)
                         .astype(float), (),
                         np.repeat([model.op_made(name, c) for c in members[name]], num_flags).astype(float))
             for name in group.members}
    for edge in inner:
        bit = bit_of.get(edge.tensor)
        by_kept = {kept: np.repeat(np.array([input_transient_bytes(
            model, edge, members[edge.src_op][k] if edge.src_op else None, members[edge.dst_op][k], None, kept)
            for k in range(n)]), num_flags, axis=0) for kept in ((False,) if bit is None else (False, True))}
        phases = by_kept[False]
        if bit is not None:
            set_bit = ((np.arange(n * num_flags) % num_flags) >> bit & 1)[:, None] == 1
            phases = np.where(set_bit, by_kept[True], by_kept[False])
        found[edge.dst_op] = found[edge.dst_op].plus(phases.T)
    return found


def fold(edges: list[EdgeCosts], phases: Mapping[int, np.ndarray], crossing: Mapping[str, Sequence[int]],
         known: Mapping[str, Known], group_of: Mapping[str, int], num_groups: int, later: Mapping[str, float]
         ) -> tuple[tuple[tuple[Level, ...], ...], dict[int, Carrier]]:
    """Per op with crossing inputs (`crossing[q]`: problem edges; `phases[i]`: edge i's
    [3, R, K_src', K_dst'] (L, H, P)): its carrier, and the digits each group's index needs
    (`later`: each op's later_q, cost.made)."""
    levels: list[list[Level]] = [[] for _ in range(num_groups)]
    combos = [1] * num_groups
    carriers: dict[int, Carrier] = {}
    found_values: dict[tuple, np.ndarray] = {}     # by (phases table, most, tolerance): twins share tables
    for q, inputs in crossing.items():
        g = group_of[q]
        order = sorted(inputs, key=lambda i: -_span(phases[i][2]))
        carrier, kept = order[0], known[q]
        tolerance = LEVEL_TOLERANCE * max(_largest(phases[i][2]) for i in inputs)
        for i in order[1:]:
            most = min(MAX_LEVELS, MAX_LEVELS_PER_GROUP // combos[g])
            key = (id(phases[i]), most, tolerance)
            values = found_values.get(key)
            if values is None:
                values = found_values[key] = _level_values(phases[i], most, tolerance)
            if values.shape[1] == 1:
                kept = kept.plus(values[:, 0, :].T)
            else:
                levels[g].append(Level(i, carrier, values, phases[i]))
                combos[g] *= values.shape[1]
        carriers[carrier] = Carrier(phases[carrier], kept, later[q])
    return tuple(tuple(found) for found in levels), carriers


def expand(node_tables: list[list[np.ndarray]], edges: list[EdgeCosts], levels: Sequence[Sequence[Level]],
           carriers: Mapping[int, Carrier]) -> tuple[list[list[np.ndarray]], list[EdgeCosts]]:
    """Every group's index k' -> k' * L + l over its digits' combinations l: node tables repeated,
    edge tables repeated along the group's axis, a bounded input's options beyond its digit's
    triple forbidden, and each carrier's term computed per combination."""
    sizes = [level_count(found) for found in levels]
    nodes = [[np.repeat(t, sizes[g]) if sizes[g] > 1 else t for g, t in enumerate(table)] for table in node_tables]
    out = []
    for i, e in enumerate(edges):
        ls, ld = sizes[e.src], sizes[e.dst]
        mem, time = (np.repeat(np.repeat(t, ls, axis=1), ld, axis=2) if ls * ld > 1 else t for t in (e.mem, e.time))
        for j, level in enumerate(levels[e.dst]):
            if level.edge == i:
                mem = _forbid(mem, np.repeat(level.phases, ls, axis=2), level.values, level_digits(levels[e.dst], j))
        transient = _carrier_term(carriers[i], levels[e.dst], i, ls) if i in carriers else None
        out.append(EdgeCosts(e.src, e.dst, mem, time, e.name, transient))
    return nodes, out


def level_count(levels: Sequence[Level]) -> int:
    return math.prod(level.values.shape[1] for level in levels)


def level_digits(levels: Sequence[Level], j: int) -> np.ndarray:
    """[L]: digit j of every combination l (mixed radix, the first digit most significant)."""
    stride = math.prod(level.values.shape[1] for level in levels[j + 1:])
    return np.arange(level_count(levels)) // stride % levels[j].values.shape[1]


def level_of(levels: Sequence[Level], index: int, src_indices: Sequence[int]) -> int:
    """An exact combination l for a strategy: per digit, the first whose triple covers the
    bounded input's (L, H, P) under one of its options, at the source's index `src_indices[j]`
    and this `index`."""
    combination = 0
    for level, src in zip(levels, src_indices):
        own = level.phases[:, :, src, index]                      # [3, R]
        covered = (own[:, :, None] <= level.values[index].T[:, None, :]).all(axis=0).any(axis=0)
        digit = int(np.argmax(covered)) if covered.any() else level.values.shape[1] - 1
        combination = combination * level.values.shape[1] + digit
    return combination


def _carrier_term(carrier: Carrier, levels: Sequence[Level], edge: int, ls: int) -> np.ndarray:
    """[R, K_src' * L_src, K' * L]: T_q over the carrier's (L, H, P), q's known inputs and, per
    combination, the triples of the digits this carrier counts."""
    phases = np.repeat(carrier.phases, ls, axis=2) if ls > 1 else carrier.phases
    count = level_count(levels)
    mine = [(level, level_digits(levels, j)) for j, level in enumerate(levels) if level.carrier == edge]
    inputs = [tuple(v[None, None, :, None] for v in lhp) for lhp in carrier.known.inputs]
    inputs += [tuple(level.values[:, digits, c][None, None] for c in range(3)) for level, digits in mine]
    inputs.append(tuple(p[..., None] for p in phases))
    made = carrier.known.made
    term = op_term(carrier.known.own[None, None, :, None], inputs,
                   made[None, None, :, None] if isinstance(made, np.ndarray) else made, carrier.later)
    term = np.broadcast_to(term, phases.shape[1:] + (count,))
    return term.reshape(phases.shape[1], phases.shape[2], -1)


def _largest(table: np.ndarray) -> float:
    finite = table[np.isfinite(table)]
    return float(finite.max()) if finite.size else 0.0


def _span(table: np.ndarray) -> float:
    """How much a [R, K_src, K_dst] table varies with the source and option, where it varies most."""
    finite = np.where(np.isfinite(table), table, np.nan)
    return float(np.nanmax(np.nanmax(finite, axis=(0, 1)) - np.nanmin(finite, axis=(0, 1))))


def _level_values(phases: np.ndarray, most: int, tolerance_bytes: float) -> np.ndarray:
    """[K', A, 3]: per destination index, the input's distinct (L, H, P) sorted by P, then L,
    then H; triples within `tolerance_bytes` of a run's first merge into it, and past `most`
    runs neighbouring runs merge; a run stands for its componentwise largest. One digit when
    the input never varies with the source by more than the tolerance."""
    per_index = []
    for kd in range(phases.shape[3]):
        triples = phases[:, :, :, kd].reshape(3, -1).T
        triples = np.unique(triples[np.isfinite(triples).all(axis=1)], axis=0)
        triples = triples[np.lexsort((triples[:, 1], triples[:, 0], triples[:, 2]))] if len(triples) else np.zeros((1, 3))
        runs, first = [[triples[0]]], triples[0]
        for t in triples[1:]:
            if (t - first).max() <= tolerance_bytes:
                runs[-1].append(t)
            else:
                runs.append([t])
                first = t
        per_index.append([np.max(run, axis=0) for run in runs])
    count = min(max(len(runs) for runs in per_index), max(1, most))
    rows = []
    for runs in per_index:
        merged = [np.max(part, axis=0) for part in np.array_split(np.array(runs), min(count, len(runs)))]
        rows.append(np.array(merged + merged[-1:] * (count - len(merged))))
    return np.array(rows)


def _forbid(mem: np.ndarray, phases: np.ndarray, values: np.ndarray, digits: np.ndarray) -> np.ndarray:
    """mem [R, Ks, K' * L]: +inf where the input's (L, H, P) exceeds its digit's triple."""
    r, ks = mem.shape[:2]
    mem = mem.reshape(r, ks, values.shape[0], len(digits))
    bound = values[:, digits, :]                                        # [K', L, 3]
    allowed = np.ones(mem.shape, dtype=bool)
    for c in range(3):
        allowed &= phases[c][..., None] <= bound[None, None, :, :, c]
    return np.where(allowed, mem, np.inf).reshape(r, ks, -1)


__all__ = ["Carrier", "Known", "LEVEL_TOLERANCE", "Level", "MAX_LEVELS", "MAX_LEVELS_PER_GROUP", "expand", "fold", "level_count",
           "level_digits", "level_of", "member_inputs"]
