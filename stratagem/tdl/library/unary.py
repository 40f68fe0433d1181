"""Elementwise math on one tensor, any rank: output element i is f(x[i]).

Every dim of these ops splits with no communication; the analysis finds that from the single
access `x[d0, d1, ...]`, nothing here says so. Functions the TDL has no primitive for are
composed from those it has (log2 x = log x / log 2, sinh x = (e^x - e^-x) / 2).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from stratagem.tdl import expr as tdl
from stratagem.tdl.library.common import pointwise
from stratagem.tdl.trace import OpDef, op

EXAMPLE = ([5, 6],)


def _math(name: str, fn: Callable, doc: str, saves: str | None = None) -> OpDef:
    def describe(x):
        return pointwise(name, (x,), fn)

    describe.__doc__ = doc
    return op(name=name, example=EXAMPLE, saves=saves)(describe)


exp = _math("exp", tdl.exp, "e ** x", saves="output")
expm1 = _math("expm1", tdl.expm1, "e ** x - 1", saves="output")
log = _math("log", tdl.log, "natural logarithm")
log1p = _math("log1p", tdl.log1p, "log(1 + x)")
log2 = _math("log2", lambda v: tdl.log(v) / math.log(2.0), "log(x) / log(2)")
log10 = _math("log10", lambda v: tdl.log(v) / math.log(10.0), "log(x) / log(10)")
sqrt = _math("sqrt", tdl.sqrt, "square root", saves="output")
rsqrt = _math("rsqrt", tdl.rsqrt, "1 / sqrt(x)", saves="output")
neg = _math("neg", lambda v: -v, "-x", saves="nothing")
abs_ = _math("abs", tdl.absolute, "|x|")
reciprocal = _math("reciprocal", tdl.reciprocal, "1 / x", saves="output")
erf = _math("erf", tdl.erf, "the error function")
sin = _math("sin", tdl.sin, "sine")
cos = _math("cos", tdl.cos, "cosine")
tan = _math("tan", lambda v: tdl.sin(v) / tdl.cos(v), "sin(x) / cos(x)", saves="output")
sinh = _math("sinh", lambda v: (tdl.exp(v) - tdl.exp(-v)) * 0.5, "(e^x - e^-x) / 2")
cosh = _math("cosh", lambda v: (tdl.exp(v) + tdl.exp(-v)) * 0.5, "(e^x + e^-x) / 2")
tanh = _math("tanh", tdl.tanh, "hyperbolic tangent", saves="output")
asin = _math("asin", tdl.asin, "inverse sine")
acos = _math("acos", tdl.acos, "inverse cosine")
atan = _math("atan", tdl.atan, "inverse tangent")
asinh = _math("asinh", lambda v: tdl.log(v + tdl.sqrt(v * v + 1.0)), "log(x + sqrt(x^2 + 1))")
acosh = _math("acosh", lambda v: tdl.log(v + tdl.sqrt(v * v - 1.0)), "log(x + sqrt(x^2 - 1))")
atanh = _math("atanh", lambda v: 0.5 * tdl.log((1.0 + v) / (1.0 - v)), "log((1 + x) / (1 - x)) / 2")
floor = _math("floor", tdl.floor, "round down", saves="nothing")
ceil = _math("ceil", tdl.ceil, "round up", saves="nothing")
round_ = _math("round", tdl.round_, "round half to even", saves="nothing")
trunc = _math("trunc", tdl.trunc, "round toward zero", saves="nothing")
sign = _math("sign", tdl.sign, "-1, 0 or 1", saves="nothing")
logical_not = _math("logical_not", tdl.logical_not, "1 where x == 0, else 0")
isnan = _math("isnan", lambda v: v != v, "1 where x is NaN (the only value unequal to itself)")
isinf = _math("isinf", lambda v: tdl.absolute(v) == math.inf, "1 where |x| is infinite")
