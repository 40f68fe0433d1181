"""FLOPs of a description, with loop-invariant hoisting.

Every elementwise function application costs one FLOP per distinct value it produces, and a
reducer one FLOP per element it folds. A node's values are indexed by its *free* indices (those it
uses that are not bound inside it), so a subexpression is counted over the product of its free
indices' extents, not over the whole loop nest around it: layer norm's mean costs B*C, not B*C*C.
This gives 2*M*K*N for a matmul and 2*B*Co*Y*X*Ci*Kh*Kw for a convolution.

The result is a polynomial in the extents, sum_i coef_i * prod_{v in vars_i} X_v, so one worker's
FLOPs under a split are the same polynomial at its local extents (`FlopPolynomial.evaluate`).
Nested reducer indices are never split, so redundant work (every worker recomputing a full-row
mean when the normalized dim is split) shows up as it should.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stratagem.tdl.expr import FULL, Access, Apply, Const, IndexValue, OpaqueResult, Reduce, Value, Where
from stratagem.tdl.indexing import IndexCond


@dataclass(frozen=True)
class FlopPolynomial:
    terms: tuple[tuple[float, frozenset[int]], ...]   # (FLOPs per point, variable uids)

    def evaluate(self, extents: Mapping[int, int]) -> float:
        return float(sum(c * math.prod(extents[u] for u in vs) for c, vs in self.terms))


def flop_polynomial(desc: Any, only: str | None = None) -> FlopPolynomial:
    """FLOPs of the description; with `only`, the number of distinct values of that function
    (`only="uniform"`: the random numbers an op draws), counted the same way."""
    counts: dict[frozenset[int], float] = {}
    for out in desc.outputs:
        _count(out, counts, desc.extents, only)
    return FlopPolynomial(tuple((c, vs) for vs, c in counts.items() if c))


def _count(node: Value, counts: dict[frozenset[int], float], extents: Mapping[int, int],
           only: str | None = None) -> frozenset[int]:
    """Add node's FLOPs (or its applications of `only`) to counts; return its free index uids."""
    if isinstance(node, Access):
        return frozenset(v.uid for i in node.indices if i is not FULL for v in i.variables())
    if isinstance(node, IndexValue):
        return frozenset(v.uid for v in node.index.variables())
    if isinstance(node, Const):
        return frozenset()
    if isinstance(node, Apply):
        free = frozenset().union(*(_count(a, counts, extents, only) for a in node.args))
        if only is None or node.fn == only:
            counts[free] = counts.get(free, 0.0) + 1.0
        return free
    if isinstance(node, Where):
        cond = (frozenset(v.uid for v in node.cond.expr.variables()) if isinstance(node.cond, IndexCond)
                else _count(node.cond, counts, extents, only))
        return cond | _count(node.then, counts, extents, only) | _count(node.otherwise, counts, extents, only)
    if isinstance(node, Reduce):
        inner = _count(node.body, counts, extents, only)
        if only is None:
            counts[inner] = counts.get(inner, 0.0) + 1.0
        return inner - {v.uid for v in node.vars}
    if isinstance(node, OpaqueResult):
        free = frozenset().union(*(_count(a, counts, extents, only) for a in node.call.args))
        per_call = node.call.fn.flops_per_call
        if per_call is not None and only is None:
            shapes = [a.tensor.shape for a in node.call.args]
            counts[free] = counts.get(free, 0.0) + float(per_call(*shapes))
        return free | frozenset(v.uid for i in node.indices for v in i.variables())
    raise TypeError(f"unexpected node {node!r}")


__all__ = ["FlopPolynomial", "flop_polynomial"]
