"""How far apart two evaluations of the same graph may land in floating point: a bound derived from
the computation, for checks that two programs (a split and the whole op, a distributed run and one
process) compute the same math.

A value computed with c floating-point operations, in any order, carries a relative error of at most
gamma_c = c u / (1 - c u), with u the unit roundoff of its dtype (Higham, "Accuracy and Stability of
Numerical Algorithms", 2nd ed., Lemma 3.1 and §3.1 for sums and inner products, whatever the order);
two such evaluations differ by at most twice that. Through a chain of ops the relative errors add
(first order), so for a graph

    steps(o)     = flops(o) / elements(o's outputs)                         (`op_steps`)
    |a - b| / |a| <= 2 sum over ops o of u_o steps(o)                       (`same_math_rtol`)

with u_o the unit roundoff of the dtype o computes in (float32 ops in a float64 graph count as
float32; integer ops as exact).

flops(o) is the TDL description's count (stratagem.tdl.flops), so a matmul contributes 2K per output
element, an elementwise op 1, a view 0; an op priced at no FLOPs (opaque, a copy) counts one per
element. The bound assumes the math itself is well conditioned (no catastrophic cancellation of
large terms); it is a bound on rounding, not on a wrong split, which shows as differences orders of
magnitude above it.
"""

from __future__ import annotations

import math

import numpy as np

from stratagem.ir import Graph
from stratagem.tdl.analysis import Analysis
from stratagem.tdl.graphops import AnalysisCache


def unit_roundoff(dtype: str) -> float:
    """u = eps / 2 of a floating-point dtype name ("float32", "float64", "bfloat16", ...); 0 for
    integer and boolean dtypes, whose arithmetic here is exact."""
    if dtype == "bfloat16":
        return 2.0 ** -8
    kind = np.dtype(dtype).kind if dtype != "bool" else "b"
    return float(np.finfo(np.dtype(dtype)).eps) / 2 if kind in "fc" else 0.0


def op_steps(analysis: Analysis | None, output_elements: int) -> float:
    """Floating-point operations behind each output element of one op (at least one)."""
    flops = analysis.flops() if analysis is not None else 0.0
    return max(flops / max(output_elements, 1), 1.0)


def rounding_steps(graph: Graph, analyses: AnalysisCache | None = None) -> float:
    """steps(graph): every op's operations per output element, summed."""
    analyses = analyses or AnalysisCache(graph)
    return sum(_steps(graph, op, analyses) for op in graph.ops)


def same_math_rtol(graph: Graph, floating: str | None = None, analyses: AnalysisCache | None = None
                   ) -> float:
    """2 sum_o u_o steps(o): each op rounds in the dtype of its output as captured (a graph captured
    from a float64 module that casts to float32 somewhere carries float32's rounding there), or in
    `floating` for every floating-point op when given."""
    analyses = analyses or AnalysisCache(graph)
    return 2 * sum(_roundoff(graph.tensors[op.outputs[0]].dtype, floating) * _steps(graph, op, analyses)
                   for op in graph.ops)


def _roundoff(dtype: str, floating: str | None) -> float:
    u = unit_roundoff(dtype)
    return unit_roundoff(floating) if floating is not None and u > 0 else u


def _steps(graph: Graph, op, analyses: AnalysisCache) -> float:
    elements = sum(math.prod(graph.tensors[t].shape) for t in op.outputs)
    return op_steps(analyses[op.name] if op.kind != "opaque" else None, elements)
