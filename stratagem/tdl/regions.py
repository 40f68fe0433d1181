"""Which input elements an output region reads: a walk over a description under index ranges.

`iter_accesses(value, ranges)` yields every tensor access with the index ranges in force where it
is evaluated. A `where` whose condition is over indices narrows the range of its variable in each
branch (`refine`), and drops a branch whose range becomes empty, so `cat` reads from `b` only the
rows past `a`. Regions are then the bounding boxes of the accesses (`access_box`), and
`is_exact_box` tells whether every element of that box is really read.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from stratagem.tdl.expr import FULL, Access, Apply, OpaqueResult, Reduce, Value, Where
from stratagem.tdl.indexing import (
    INT_DOMAIN, Affine, FloorDiv, IndexCond, IndexVar, atom_variables, bounds, evaluate,
)

Ranges = dict[int, tuple[int, int]]         # uid -> inclusive (lo, hi)
Box = tuple[tuple[int, int], ...]           # per dim half-open (start, stop)

_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_ENUMERATION_LIMIT = 1 << 22


def full_ranges(desc: Any) -> Ranges:
    return {uid: (0, n - 1) for uid, n in desc.extents.items()}


def iter_accesses(value: Value, ranges: Mapping[int, tuple[int, int]]
                  ) -> Iterator[tuple[Access, Ranges, tuple[IndexCond, ...]]]:
    """Yield (access, ranges in force, index conditions in force) for every access under value."""
    stack: list[tuple[Value, Ranges, tuple[IndexCond, ...]]] = [(value, dict(ranges), ())]
    while stack:
        node, rng, conds = stack.pop()
        if isinstance(node, Access):
            yield node, rng, conds
        elif isinstance(node, Where) and isinstance(node.cond, IndexCond):
            for branch, cond in ((node.then, node.cond),
                                 (node.otherwise, IndexCond(node.cond.expr, _NEGATED[node.cond.relation]))):
                narrowed = refine(rng, cond)
                if narrowed is not None:
                    stack.append((branch, narrowed, (*conds, cond)))
        elif isinstance(node, Where):
            stack.extend((c, rng, conds) for c in (node.cond, node.then, node.otherwise))
        elif isinstance(node, Apply):
            stack.extend((a, rng, conds) for a in node.args)
        elif isinstance(node, Reduce):
            stack.append((node.body, rng, conds))
        elif isinstance(node, OpaqueResult):
            stack.extend((a, rng, conds) for a in node.call.args)


def refine(ranges: Ranges, cond: IndexCond) -> Ranges | None:
    """Ranges under which `cond` can hold, narrowed per variable; None if it never holds.

    For `a*v + rest REL 0`, v is bounded using the interval of `rest` over `ranges`: exact when
    `rest` is constant (one variable), a sound over-approximation otherwise (`j <= i` with i in
    [lo, hi] gives j <= hi), so a causal mask reads only the prefix it needs.
    """
    lo, hi = bounds(cond.expr, ranges, INT_DOMAIN)
    if not _can_hold(lo, hi, cond.relation):
        return None
    narrowed = dict(ranges)
    for var, a in cond.expr.terms:
        if not isinstance(var, IndexVar):
            continue
        rest = Affine(tuple(t for t in cond.expr.terms if t[0] is not var), cond.expr.const)
        found = _narrow(narrowed[var.uid], a, bounds(rest, narrowed, INT_DOMAIN), cond.relation)
        if found is None:
            return None
        narrowed[var.uid] = found
    return narrowed


def _narrow(v_range: tuple[int, int], a: int, rest: tuple[int, int], rel: str
            ) -> tuple[int, int] | None:
    """Range of v such that a*v + r REL 0 for some r in `rest` (inclusive bounds)."""
    v_lo, v_hi = v_range
    r_lo, r_hi = rest
    if rel in ("<", "<="):                        # a*v <= -r_lo (minus 1 for <)
        limit = -r_lo - (1 if rel == "<" else 0)
        v_lo, v_hi = (v_lo, min(v_hi, limit // a)) if a > 0 else (max(v_lo, -(limit // -a)), v_hi)
    elif rel in (">", ">="):                      # a*v >= -r_hi (plus 1 for >)
        limit = -r_hi + (1 if rel == ">" else 0)
        v_lo, v_hi = (max(v_lo, -(-limit // a)), v_hi) if a > 0 else (v_lo, min(v_hi, limit // a))
    elif rel == "==":                             # a*v in [-r_hi, -r_lo]
        lo_val, hi_val = (-r_hi, -r_lo) if a > 0 else (r_lo, r_hi)
        k = abs(a)
        v_lo, v_hi = max(v_lo, -(-lo_val // k)), min(v_hi, hi_val // k)
    return (v_lo, v_hi) if v_lo <= v_hi else None


def _can_hold(lo: int, hi: int, relation: str) -> bool:
    return {"<": lo < 0, "<=": lo <= 0, ">": hi > 0, ">=": hi >= 0,
            "==": lo <= 0 <= hi, "!=": not (lo == hi == 0)}[relation]


def access_box(acc: Access, ranges: Ranges) -> Box | None:
    """Half-open box of elements `acc` reads, clipped to the tensor; None if it reads none."""
    box = []
    for dim, index in enumerate(acc.indices):
        size = acc.tensor.shape[dim]
        if index is FULL:
            box.append((0, size))
            continue
        lo, hi = bounds(index, ranges, INT_DOMAIN)
        start, stop = max(lo, 0), min(hi + 1, size)
        if start >= stop:
            return None
        box.append((start, stop))
    return tuple(box)


def union_box(boxes: list[Box]) -> Box | None:
    if not boxes:
        return None
    return tuple((min(b[d][0] for b in boxes), max(b[d][1] for b in boxes)) for d in range(len(boxes[0])))


def boxes_cover_union(boxes: list[Box]) -> bool:
    """Whether the union of `boxes` is their bounding box (checked conservatively)."""
    unique = list(dict.fromkeys(boxes))
    bound = union_box(unique)
    if bound is None or bound in unique:
        return True
    varying = [d for d in range(len(bound)) if len({b[d] for b in unique}) > 1]
    if len(varying) != 1:
        return False
    spans = sorted(b[varying[0]] for b in unique)
    reach = spans[0][1]
    for start, stop in spans[1:]:
        if start > reach:
            return False
        reach = max(reach, stop)
    return True


def is_exact_access(acc: Access, ranges: Ranges, unsplit: Ranges | None = None) -> bool:
    """Whether `acc` reads every element of its (unclipped) bounding box under `ranges`.

    With `unsplit` (the whole op's ranges), dims whose variables all keep their unsplit ranges are
    not checked: there a worker reads what the whole op reads (a 1x1 convolution of stride 2 skips
    columns whether split or not), so the split adds no over-fetch.
    """
    groups = _dims_grouped_by_shared_variables(acc)
    for dims in groups:
        if unsplit is not None and _keeps_unsplit_ranges(acc, dims, ranges, unsplit):
            continue
        if len(dims) == 1 and _is_contiguous(acc.indices[dims[0]], ranges):
            continue
        if not _enumerated_image_is_box([acc.indices[d] for d in dims], ranges):
            return False
    return True


def _keeps_unsplit_ranges(acc: Access, dims: list[int], ranges: Ranges, unsplit: Ranges) -> bool:
    return all(ranges[v.uid] == unsplit[v.uid] for d in dims for v in acc.indices[d].variables())


def _dims_grouped_by_shared_variables(acc: Access) -> list[list[int]]:
    owner: dict[int, int] = {}
    parent = list(range(len(acc.indices)))

    def root(d: int) -> int:
        while parent[d] != d:
            d = parent[d]
        return d

    for dim, index in enumerate(acc.indices):
        if index is FULL:
            continue
        for var in index.variables():
            if var.uid in owner:
                parent[root(dim)] = root(owner[var.uid])
            owner[var.uid] = dim
    groups: dict[int, list[int]] = {}
    for dim, index in enumerate(acc.indices):
        if index is not FULL:
            groups.setdefault(root(dim), []).append(dim)
    return list(groups.values())


def _is_contiguous(index: Affine, ranges: Ranges) -> bool:
    """Sum of ranges a_i * [lo_i, hi_i] is gap-free iff each step fits the span so far."""
    seen: set[int] = set()
    parts: list[tuple[int, int]] = []           # (|coefficient|, number of distinct atom values)
    for atom, coef in index.terms:
        variables = atom_variables(atom)
        if any(v.uid in seen for v in variables):
            return False
        seen.update(v.uid for v in variables)
        if not _atom_is_contiguous(atom, ranges):
            return False
        lo, hi = bounds(Affine(((atom, 1),), 0), ranges, INT_DOMAIN)
        if hi > lo:
            parts.append((abs(coef), hi - lo + 1))
    span = 0
    for step, count in sorted(parts):
        if step > span + 1:
            return False
        span += step * (count - 1)
    return True


def _atom_is_contiguous(atom: Any, ranges: Ranges) -> bool:
    if isinstance(atom, IndexVar):
        return True
    if not _is_contiguous(atom.inner, ranges):
        return False
    if isinstance(atom, FloorDiv):
        return True
    lo, hi = bounds(atom.inner, ranges, INT_DOMAIN)
    return hi - lo + 1 >= atom.divisor or lo // atom.divisor == hi // atom.divisor


def _enumerated_image_is_box(indices: list[Affine], ranges: Ranges) -> bool:
    variables = {v.uid: v for index in indices for v in index.variables()}
    lengths = [ranges[u][1] - ranges[u][0] + 1 for u in variables]
    if math.prod(lengths) > _ENUMERATION_LIMIT:
        return False
    grids = np.meshgrid(*[np.arange(ranges[u][0], ranges[u][1] + 1) for u in variables],
                        indexing="ij", sparse=False)
    values = dict(zip(variables, (g.ravel() for g in grids)))
    points = np.stack([np.broadcast_to(evaluate(index, values), grids[0].size if grids else 1)
                       for index in indices], axis=1)
    unique = np.unique(points, axis=0)
    volume = math.prod(int(unique[:, i].max() - unique[:, i].min() + 1) for i in range(len(indices)))
    return len(unique) == volume
