"""Elementwise ops on two or three tensors with NumPy broadcasting, any rank.

A dim where one operand has size 1 reads that operand at index 0, so splitting it replicates the
small operand (`R`) and shards the other (`S(d)`); the analysis derives this from the accesses.
Comparisons and logical ops give 1.0 or 0.0 (torch gives bool; the values agree).
"""

from __future__ import annotations

from collections.abc import Callable

from stratagem.errors import TDLError
from stratagem.tdl import expr as tdl
from stratagem.tdl.library.common import pointwise
from stratagem.tdl.trace import OpDef, op

EXAMPLE = ([5, 6], [6])


def _binary(name: str, fn: Callable, doc: str, saves: str | None = None) -> OpDef:
    def describe(x, y):
        return pointwise(name, (x, y), fn)

    describe.__doc__ = doc
    return op(name=name, example=EXAMPLE, saves=saves)(describe)


def _divide(a, b, rounding_mode):
    if rounding_mode is None:
        return a / b
    if rounding_mode == "trunc":
        return tdl.trunc(a / b)
    if rounding_mode == "floor":
        return tdl.floor(a / b)
    raise TDLError("op 'div': unknown rounding mode", expected="None, 'trunc' or 'floor'",
                   got=repr(rounding_mode))


@op(saves="nothing", example=EXAMPLE)
def add(x, y, *, alpha=1):
    """x + alpha * y"""
    return pointwise("add", (x, y), lambda a, b: a + b if alpha == 1 else a + alpha * b)


@op(saves="nothing", example=EXAMPLE)
def sub(x, y, *, alpha=1):
    """x - alpha * y"""
    return pointwise("sub", (x, y), lambda a, b: a - b if alpha == 1 else a - alpha * b)


@op(example=EXAMPLE)
def div(x, y, *, rounding_mode=None):
    """x / y, optionally rounded ('trunc' or 'floor')."""
    return pointwise("div", (x, y), lambda a, b: _divide(a, b, rounding_mode))


mul = _binary("mul", lambda a, b: a * b, "x * y")
pow_ = _binary("pow", lambda a, b: a ** b, "x ** y", saves="inputs_and_output")
maximum = _binary("maximum", tdl.maximum, "the larger of x and y (NaN if either is)")
minimum = _binary("minimum", tdl.minimum, "the smaller of x and y (NaN if either is)")
eq = _binary("eq", lambda a, b: a == b, "1 where x == y")
ne = _binary("ne", lambda a, b: a != b, "1 where x != y")
lt = _binary("lt", lambda a, b: a < b, "1 where x < y")
le = _binary("le", lambda a, b: a <= b, "1 where x <= y")
gt = _binary("gt", lambda a, b: a > b, "1 where x > y")
ge = _binary("ge", lambda a, b: a >= b, "1 where x >= y")
fmod = _binary("fmod", lambda a, b: tdl.apply("fmod", a, b), "remainder with the sign of x (C fmod)")
remainder = _binary("remainder", lambda a, b: tdl.apply("remainder", a, b),
                    "remainder with the sign of y (Python %)")
atan2 = _binary("atan2", tdl.atan2, "the angle of the point (y=x, x=y)")
logical_and = _binary("logical_and", tdl.logical_and, "1 where both are nonzero")
logical_or = _binary("logical_or", tdl.logical_or, "1 where either is nonzero")
logical_xor = _binary("logical_xor", lambda a, b: (a != 0.0) != (b != 0.0), "1 where exactly one is nonzero")


@op(example=([5, 6], [5, 6], [6]))
def where(condition, x, y):
    """x where condition is nonzero, else y (a choice by data, so both branches are read)."""
    return pointwise("where", (condition, x, y), tdl.where)


@op(example=(([5, 6], [6]), {"value": -1e4}))
def masked_fill(x, mask, *, value):
    """value where mask is nonzero, else x."""
    return pointwise("masked_fill", (x, mask), lambda a, m: tdl.where(m, value, a))


@op(example=([5, 6], [6], [5, 1]))
def clamp_tensor(x, min, max):  # noqa: A002 - ATen's argument names
    """x clamped below by min and above by max, both broadcast tensors (with one bound, capture
    uses maximum or minimum: a graph op has no place for a missing input before a present one)."""
    return pointwise("clamp_tensor", (x, min, max), lambda v, lo, hi: tdl.minimum(tdl.maximum(v, lo), hi))
