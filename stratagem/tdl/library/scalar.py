"""Elementwise ops of a tensor and a Python number (ATen's `.Scalar` overloads), any rank.

The number is an attribute, named as in ATen (`other`, `exponent`); `rpow_scalar`'s number is
ATen's `self` (pow.Scalar), named `base` here because `self` reads badly as an attribute.
"""

from __future__ import annotations

from collections.abc import Callable

from stratagem.tdl import expr as tdl
from stratagem.tdl.library.binary import _divide
from stratagem.tdl.library.common import pointwise
from stratagem.tdl.trace import OpDef, op

EXAMPLE = ([5, 6],)


def _with_other(name: str, fn: Callable, doc: str, saves: str | None = None) -> OpDef:
    def describe(x, *, other):
        return pointwise(name, (x,), lambda v: fn(v, other))

    describe.__doc__ = doc
    return op(name=name, example=(EXAMPLE, {"other": 0.5}), saves=saves)(describe)


@op(saves="nothing", example=(EXAMPLE, {"other": 2.0}))
def add_scalar(x, *, other, alpha=1):
    """x + alpha * other"""
    return pointwise("add_scalar", (x,), lambda v: v + alpha * other)


@op(saves="nothing", example=(EXAMPLE, {"other": 2.0}))
def sub_scalar(x, *, other, alpha=1):
    """x - alpha * other"""
    return pointwise("sub_scalar", (x,), lambda v: v - alpha * other)


@op(saves="nothing", example=(EXAMPLE, {"other": 1.0}))
def rsub_scalar(x, *, other, alpha=1):
    """other - alpha * x (BERT's 1 - mask)"""
    return pointwise("rsub_scalar", (x,), lambda v: other - alpha * v)


@op(saves="nothing", example=(EXAMPLE, {"other": 8.0}))
def div_scalar(x, *, other, rounding_mode=None):
    """x / other, optionally rounded ('trunc' or 'floor')."""
    return pointwise("div_scalar", (x,), lambda v: _divide(v, tdl.Const(float(other)), rounding_mode))


@op(example=(EXAMPLE, {"exponent": 2.0}))
def pow_scalar(x, *, exponent):
    """x ** exponent"""
    return pointwise("pow_scalar", (x,), lambda v: v ** exponent)


@op(saves="inputs_and_output", example=(EXAMPLE, {"base": 2.0}))
def rpow_scalar(x, *, base):
    """base ** x"""
    return pointwise("rpow_scalar", (x,), lambda v: tdl.Const(float(base)) ** v)


@op(example=(EXAMPLE, {"min": -0.5, "max": 0.5}))
def clamp(x, *, min=None, max=None):  # noqa: A002 - ATen's argument names
    """x clamped to [min, max] (either bound may be None)."""
    def fn(v):
        out = v if min is None else tdl.maximum(v, min)
        return out if max is None else tdl.minimum(out, max)
    return pointwise("clamp", (x,), fn)


mul_scalar = _with_other("mul_scalar", lambda v, s: v * s, "x * other", saves="nothing")
eq_scalar = _with_other("eq_scalar", lambda v, s: v == s, "1 where x == other")
ne_scalar = _with_other("ne_scalar", lambda v, s: v != s, "1 where x != other")
lt_scalar = _with_other("lt_scalar", lambda v, s: v < s, "1 where x < other")
le_scalar = _with_other("le_scalar", lambda v, s: v <= s, "1 where x <= other")
gt_scalar = _with_other("gt_scalar", lambda v, s: v > s, "1 where x > other")
ge_scalar = _with_other("ge_scalar", lambda v, s: v >= s, "1 where x >= other")
fmod_scalar = _with_other("fmod_scalar", lambda v, s: tdl.apply("fmod", v, s), "C fmod(x, other)",
                          saves="nothing")
remainder_scalar = _with_other("remainder_scalar", lambda v, s: tdl.apply("remainder", v, s),
                               "x mod other with the sign of other", saves="nothing")
