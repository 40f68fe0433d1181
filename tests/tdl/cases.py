"""Random small cases for every library op: input shapes, attributes, and value domains.

`CASES[op_name](rng)` gives a few `Case`s at uneven sizes (2..7), so that a split that drops or
doubles an element cannot cancel out. The ground-truth tests run each op on them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Case:
    shapes: tuple[Any, ...]                      # per input; None for an absent optional input
    attrs: dict[str, Any] = field(default_factory=dict)
    values: tuple[str, ...] = ()                 # per present input: a sampler name (see SAMPLERS)


def _ints(high: int) -> Callable:
    return lambda rng, shape: rng.integers(0, high, size=shape).astype(np.float64)


SAMPLERS: dict[str, Callable] = {
    "normal": lambda rng, shape: rng.standard_normal(shape),
    "positive": lambda rng, shape: np.abs(rng.standard_normal(shape)) + 0.25,
    "unit": lambda rng, shape: rng.uniform(-0.9, 0.9, size=shape),
    "above1": lambda rng, shape: 1.25 + np.abs(rng.standard_normal(shape)),
    "bool": lambda rng, shape: (rng.random(shape) < 0.5).astype(np.float64),
    "nonzero": lambda rng, shape: np.where(rng.random(shape) < 0.5, -1, 1) * (0.5 + rng.random(shape)),
    "halves": lambda rng, shape: rng.integers(-6, 7, size=shape) * 0.5,
}


def sampler(name: str) -> Callable:
    if name.startswith("int"):
        return _ints(int(name[3:]))
    return SAMPLERS[name]


def size(rng, low: int = 2, high: int = 7) -> int:
    return int(rng.integers(low, high + 1))


def shape(rng, rank: int, low: int = 2, high: int = 7) -> list[int]:
    return [size(rng, low, high) for _ in range(rank)]


def broadcast_partner(rng, full: list[int]) -> list[int]:
    """A shape that broadcasts against `full`: a suffix of it with some dims set to 1."""
    rank = int(rng.integers(0, len(full) + 1))
    out = list(full[len(full) - rank:])
    for d in range(rank):
        if rng.random() < 0.35:
            out[d] = 1
    return out


# ---- elementwise ----------------------------------------------------------------------------

DOMAINS = {
    "log": "positive", "log2": "positive", "log10": "positive", "sqrt": "positive",
    "rsqrt": "positive", "log1p": "positive", "reciprocal": "nonzero", "acosh": "above1",
    "asin": "unit", "acos": "unit", "atanh": "unit", "round": "halves",
}


def unary(name: str, attrs: dict | None = None) -> Callable:
    def make(rng):
        return [Case((shape(rng, rank),), dict(attrs or {}), (DOMAINS.get(name, "normal"),))
                for rank in (1, 2, 3)]
    return make


def binary(values: tuple[str, str] = ("normal", "normal"), attrs: dict | None = None) -> Callable:
    def make(rng):
        cases = []
        for rank in (1, 2, 3):
            full = shape(rng, rank)
            other = broadcast_partner(rng, full)
            pair = (full, other) if rng.random() < 0.5 else (other, full)
            cases.append(Case(pair, dict(attrs or {}), values))
        cases.append(Case(([size(rng), 1], [1, size(rng)]), dict(attrs or {}), values))
        return cases
    return make


def scalar(attrs: dict, domain: str = "normal") -> Callable:
    def make(rng):
        return [Case((shape(rng, rank),), dict(attrs), (domain,)) for rank in (1, 3)]
    return make


UNARY = ["exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "neg", "abs",
         "reciprocal", "erf", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan",
         "asinh", "acosh", "atanh", "floor", "ceil", "round", "trunc", "sign", "logical_not",
         "isnan", "isinf", "relu", "silu", "sigmoid", "mish", "hardsigmoid", "hardswish"]

CASES: dict[str, Callable] = {name: unary(name) for name in UNARY}
CASES.update({
    "gelu": lambda rng: unary("gelu")(rng)[:2] + unary("gelu", {"approximate": "tanh"})(rng)[1:],
    "elu": unary("elu", {"alpha": 0.7, "scale": 1.5, "input_scale": 0.8}),
    "leaky_relu": unary("leaky_relu", {"negative_slope": 0.2}),
    "hardtanh": unary("hardtanh", {"min_val": -0.5, "max_val": 0.75}),
    "softplus": unary("softplus", {"beta": 2.0, "threshold": 1.5}),
})
for _name in ("mul", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "atan2",
              "logical_and", "logical_or", "logical_xor"):
    CASES[_name] = binary()
CASES.update({
    "eq": binary(("halves", "halves")), "ne": binary(("halves", "halves")),
    "le": binary(("halves", "halves")), "ge": binary(("halves", "halves")),
    "logical_and": binary(("bool", "bool")), "logical_or": binary(("bool", "normal")),
    "logical_xor": binary(("bool", "bool")),
    "add": binary(attrs={"alpha": 2}), "sub": binary(attrs={"alpha": 1}),
    "div": lambda rng: (binary(("normal", "nonzero"))(rng)[:2]
                        + binary(("normal", "nonzero"), {"rounding_mode": "floor"})(rng)[2:3]
                        + binary(("normal", "nonzero"), {"rounding_mode": "trunc"})(rng)[3:]),
    "pow": binary(("positive", "normal")),
    "fmod": binary(("normal", "nonzero")), "remainder": binary(("normal", "nonzero")),
    "where": lambda rng: [Case((s, broadcast_partner(rng, s), broadcast_partner(rng, s)), {},
                               ("bool", "normal", "normal")) for s in (shape(rng, 2), shape(rng, 3))],
    "masked_fill": lambda rng: [Case((s, broadcast_partner(rng, s)), {"value": -3.5}, ("normal", "bool"))
                                for s in (shape(rng, 2), shape(rng, 3))],
    "clamp_tensor": lambda rng: [Case((s, broadcast_partner(rng, s), broadcast_partner(rng, s)))
                                 for s in (shape(rng, 2), shape(rng, 3))],
    "clamp": lambda rng: (scalar({"min": -0.5, "max": 0.5})(rng)[:1] + scalar({"min": 0.1})(rng)[1:]
                          + scalar({"max": -0.2})(rng)[1:]),
    "add_scalar": scalar({"other": 2.5, "alpha": 3}),
    "sub_scalar": scalar({"other": 0.5}),
    "rsub_scalar": scalar({"other": 1.0, "alpha": 2}),
    "mul_scalar": scalar({"other": -1.5}),
    "div_scalar": lambda rng: (scalar({"other": 2.5})(rng)[:1]
                               + scalar({"other": 0.75, "rounding_mode": "floor"})(rng)[1:]),
    "pow_scalar": scalar({"exponent": 2.0}) ,
    "rpow_scalar": scalar({"base": 1.7}),
    "eq_scalar": scalar({"other": 0.5}, "halves"), "ne_scalar": scalar({"other": 0.5}, "halves"),
    "lt_scalar": scalar({"other": 0.1}), "le_scalar": scalar({"other": 0.5}, "halves"),
    "gt_scalar": scalar({"other": -0.1}), "ge_scalar": scalar({"other": 0.5}, "halves"),
    "fmod_scalar": scalar({"other": 0.7}), "remainder_scalar": scalar({"other": -0.7}),
})

# ---- matrix products ------------------------------------------------------------------------


def _linear(rng):
    b, k, j, s = size(rng), size(rng), size(rng), size(rng)
    return [Case(([b, k], [j, k], [j])), Case(([b, s, k], [j, k], None)), Case(([k], [j, k], [j]))]


def _matmul(rng):
    m, k, n, b = size(rng), size(rng), size(rng), size(rng)
    return [Case(([m, k], [k, n])), Case(([b, 1, m, k], [size(rng), k, n])), Case(([k], [b, k, n])),
            Case(([b, m, k], [k])), Case(([k], [k]))]


CASES.update({
    "mm": lambda rng: [Case((shape(rng, 2)[:1] + [k], [k, size(rng)])) for k in (size(rng), size(rng))],
    "bmm": lambda rng: [Case(([b, size(rng), k], [b, k, size(rng)]))
                        for b, k in ((size(rng), size(rng)), (size(rng), size(rng)))],
    "matmul": _matmul,
    "linear": _linear,
    "addmm": lambda rng: [Case(([m, k], [k, n], [n]), {"beta": 0.5, "alpha": 2.0})
                          for m, k, n in [shape(rng, 3)]] + [
        Case(([m, k], [k, n], [m, n])) for m, k, n in [shape(rng, 3)]],
    "baddbmm": lambda rng: [Case(([b, m, k], [b, k, n], [b, m, n]), {"beta": 1.5, "alpha": 0.5})
                            for b, m, k, n in [shape(rng, 4)]] + [
        Case(([b, m, k], [b, k, n], [m, 1])) for b, m, k, n in [shape(rng, 4)]],
})
