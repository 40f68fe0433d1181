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
    "keep_first": lambda rng, shape: np.where(np.arange(shape[-1]) == 0, 1.0, rng.random(shape) < 0.5),
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

# ---- convolution and pooling ----------------------------------------------------------------


def _conv(n):
    def make(rng):
        b, ci, co = size(rng, 2, 3), 4, 6
        spatial = shape(rng, n, 5, 7)
        kernel = [int(rng.integers(1, 4)) for _ in range(n)]
        return [
            Case(([b, ci, *spatial], [co, ci, *kernel], [co]), {"padding": 1}),
            Case(([b, ci, *spatial], [co, ci // 2, *kernel], None), {"stride": 2, "groups": 2}),
            Case(([b, ci, *spatial], [co, ci, *([1] * n)], None), {"stride": 2}),
            Case(([b, ci, *spatial], [co, ci, *([2] * n)], [co]), {"dilation": 2, "padding": (1,) * n}),
        ]
    return make


def _max_pool(n):
    def make(rng):
        lead = [size(rng, 2, 3), size(rng)]
        spatial = shape(rng, n, 5, 7)
        return [Case((lead + spatial,), {"kernel_size": 3, "stride": 2, "padding": 1}),
                Case((lead[1:] + spatial,), {"kernel_size": 2}),
                Case((lead + spatial,), {"kernel_size": 2, "stride": 2, "ceil_mode": True}),
                Case((lead + spatial,), {"kernel_size": 2, "stride": 1, "dilation": 2})]
    return make


def _avg_pool(n):
    def make(rng):
        lead = [size(rng, 2, 3), size(rng)]
        spatial = shape(rng, n, 5, 7)
        cases = [Case((lead + spatial,), {"kernel_size": 3, "stride": 2, "padding": 1}),
                 Case((lead + spatial,), {"kernel_size": 3, "stride": 1, "padding": 1,
                                          "count_include_pad": False}),
                 Case((lead[1:] + spatial,), {"kernel_size": 2})]
        if n == 2:
            cases.append(Case((lead + spatial,), {"kernel_size": 2, "divisor_override": 3}))
        return cases
    return make


def _adaptive(n):
    def make(rng):
        out = [1] + [int(rng.integers(2, 4)) for _ in range(n - 1)]        # 1: a global pool
        factor = [int(rng.integers(2, 4)) for _ in range(n)]
        spatial = [o * f for o, f in zip(out, factor)]
        return [Case(([size(rng, 2, 3), size(rng), *spatial],), {"output_size": tuple(out)}),
                Case(([size(rng), *spatial[::-1]],), {"output_size": tuple(out[::-1])})]
    return make


CASES.update({
    "conv1d": _conv(1), "conv2d": _conv(2),
    "max_pool1d": _max_pool(1), "max_pool2d": _max_pool(2),
    "avg_pool1d": _avg_pool(1), "avg_pool2d": _avg_pool(2),
    "adaptive_avg_pool1d": lambda rng: [*_adaptive(1)(rng), Case(([2, size(rng), 6],), {"output_size": (3,)})],
    "adaptive_avg_pool2d": _adaptive(2),
    "upsample_nearest2d": lambda rng: [Case(([2, size(rng), size(rng), size(rng)],), {"scale_factor": 2}),
                                       Case(([size(rng), 3, 2],), {"scale_factor": (3, 2)})],
})

# ---- normalization ----------------------------------------------------------------------------


def _norm_channels(rng):
    return [size(rng, 2, 4), size(rng, 3, 5), size(rng), size(rng)]


CASES.update({
    "layer_norm": lambda rng: [
        Case(([b, s, d], [d], [d]), {"normalized_shape": (d,)}) for b, s, d in [shape(rng, 3)]] + [
        Case(([b, s, d], [s, d], None), {"normalized_shape": (s, d), "eps": 1e-3})
        for b, s, d in [shape(rng, 3)]] + [Case((shape(rng, 2), None, None), {"normalized_shape": ()})
                                           for _ in [0] if False],
    "rms_norm": lambda rng: [
        Case(([b, s, d], [d]), {"normalized_shape": (d,), "eps": 1e-6}) for b, s, d in [shape(rng, 3)]] + [
        Case(([b, d], None), {"normalized_shape": (d,)}) for b, d in [shape(rng, 2)]],
    "group_norm": lambda rng: [
        Case(([b, 6, l], [6], [6]), {"num_groups": 3}) for b, l in [shape(rng, 2)]] + [
        Case(([b, 4, h, w], None, None), {"num_groups": 2, "eps": 1e-3}) for b, h, w in [shape(rng, 3)]],
    "batch_norm": lambda rng: [
        Case((s, [s[1]], [s[1]], [s[1]], [s[1]]), {"eps": 1e-3},
             ("normal", "normal", "positive", "normal", "normal")) for s in [_norm_channels(rng)]] + [
        Case((s[:3], [s[1]], [s[1]], None, None), {}, ("normal", "normal", "positive"))
        for s in [_norm_channels(rng)]],
    "batch_norm_stats": lambda rng: [Case((_norm_channels(rng),)), Case((_norm_channels(rng)[:2],))],
    "batch_norm_apply": lambda rng: [
        Case((s, [2, s[1]], [s[1]], [s[1]]), {"count": 7.0, "eps": 1e-3}, ("normal", "positive", "normal", "normal"))
        for s in [_norm_channels(rng)]] + [
        Case((s[:3], [2, s[1]], None, None), {"count": 3.0}, ("normal", "positive"))
        for s in [_norm_channels(rng)]],
    "batch_norm_running": lambda rng: [
        Case(([2, c], [c]), {"which": which, "momentum": 0.1, "count": 12}, ("positive", "normal"))
        for c in [size(rng)] for which in (0, 1)],
})

# ---- reductions -------------------------------------------------------------------------------


def _reduction(extra: dict | None = None, dims=((1,), (0, 2), None, -1), domain="normal"):
    def make(rng):
        cases = []
        for k, dim in enumerate(dims):
            cases.append(Case((shape(rng, 3),), {"dim": dim, "keepdim": k % 2 == 1, **(extra or {})},
                              (domain,)))
        return cases
    return make


CASES.update({
    "sum": _reduction(), "mean": _reduction(), "amax": _reduction(), "amin": _reduction(),
    "prod": _reduction(), "any": _reduction(domain="bool"), "all": _reduction(domain="bool"),
    "var": _reduction({"correction": 1}), "std": _reduction({"correction": 0}),
    "logsumexp": _reduction(dims=((1,), (0, 2), -1)),
    "argmax": _reduction(dims=(1, None, -1, 0), domain="halves"),
    "argmin": _reduction(dims=(1, None, -1, 0), domain="halves"),
    "max_dim": _reduction(dims=(1, -1), domain="halves"),
    "min_dim": _reduction(dims=(0, 2), domain="halves"),
    "cumsum": lambda rng: [Case((shape(rng, 2),), {"dim": 1}), Case((shape(rng, 3),), {"dim": 0})],
})

# ---- nn -------------------------------------------------------------------------------------


def _attention(rng):
    b, h, l, s, e = size(rng, 2, 3), 4, size(rng, 3, 5), size(rng, 3, 6), size(rng, 2, 3)
    return [
        Case(([b, h, l, e], [b, h, s, e], [b, h, s, e + 1]), {}),
        Case(([b, h, l, e], [b, 2, l, e], [b, 2, l, e]), {"is_causal": True, "enable_gqa": True}),
        Case(([b, h, l, e], [b, h, s, e], [b, h, s, e], [l, s]), {"scale": 0.3}),
        Case(([b, h, l, e], [b, h, s, e], [b, h, s, e], [b, 1, 1, s]), {"mask_is_bool": True},
             ("normal", "normal", "normal", "keep_first")),
        Case(([b, h, l, e], [b, h, s, e], [b, h, s, e + 1]), {"dropout_p": 0.4, "seed": 11}),
        Case(([b, h, l, e], [b, 2, l, e], [b, 2, l, e]),
             {"dropout_p": 0.25, "is_causal": True, "enable_gqa": True, "seed": 3}),
    ]


def _lstm(rng):
    b, i, h = size(rng), size(rng), size(rng)
    return [Case(([b, i], [b, h], [b, h], [4 * h, i], [4 * h, h], [4 * h], [4 * h])),
            Case(([b, i], [b, h], [b, h], [4 * h, i], [4 * h, h], None, None))]


def _gated_lstm(rng):
    b, i, h = size(rng), size(rng), size(rng)
    return [Case(([b, i], [b, h], [b, h], [4, h, i], [4, h, h], [4, h], [4, h])),
            Case(([b, i], [b, h], [b, h], [4, h, i], [4, h, h], None, None))]


def _classes(rng, extra_dims=()):
    n, c = size(rng), size(rng, 3, 6)
    return n, c, list(extra_dims)


def _cross_entropy(rng):
    cases = []
    for reduction, smoothing, weighted, ignore in (("mean", 0.0, False, -100), ("mean", 0.2, True, 1),
                                                   ("sum", 0.1, False, 2), ("none", 0.0, True, 0),
                                                   ("mean", 0.3, False, 1)):
        n, c, d = size(rng), size(rng, 3, 6), ([size(rng)] if reduction == "sum" else [])
        attrs = {"reduction": reduction, "label_smoothing": smoothing, "ignore_index": ignore}
        cases.append(Case(([n, c, *d], [n, *d], [c] if weighted else None), attrs,
                          ("normal", f"int{c}", "positive")[:3 if weighted else 2]))
    return cases


def _nll(rng):
    cases = []
    for reduction, weighted in (("mean", True), ("sum", False), ("none", False)):
        n, c = size(rng), size(rng, 3, 6)
        cases.append(Case(([n, c], [n], [c] if weighted else None),
                          {"reduction": reduction, "ignore_index": 1},
                          ("normal", f"int{c}", "positive")[:3 if weighted else 2]))
    return cases


CASES.update({
    "softmax": lambda rng: [Case((shape(rng, 2),), {"dim": -1}), Case((shape(rng, 3),), {"dim": 1})],
    "log_softmax": lambda rng: [Case((shape(rng, 2),), {"dim": 0}), Case((shape(rng, 3),), {"dim": -1})],
    "embedding": lambda rng: [Case((shape(rng, 2), [9, 5]), {}, ("int9", "normal")),
                              Case(([size(rng)], [7, 3]), {}, ("int7", "normal"))],
    "scaled_dot_product_attention": _attention,
    "lstm_cell": _lstm,
    "gated_lstm_cell": _gated_lstm,
    "dropout": lambda rng: [Case((shape(rng, 2),), {"p": 0.3, "train": True, "seed": 5}),
                            Case((shape(rng, 3),), {"p": 0.5, "train": False})],
    "cross_entropy": _cross_entropy,
    "nll_loss": _nll,
    "mse_loss": lambda rng: [Case((s, s), {"reduction": r}) for s, r in
                             ((shape(rng, 2), "mean"), (shape(rng, 3), "sum"), (shape(rng, 2), "none"))],
})

# ---- shapes, joins, gathers, creation ---------------------------------------------------------


def _reshape(rng):
    b, s, h, d = size(rng, 2, 3), size(rng), 2, size(rng, 2, 3)
    return [Case(([b, s, h * d],), {"shape": (b, s, h, d)}), Case(([b, s, h, d],), {"shape": (b, -1)}),
            Case(([4, 6],), {"shape": (6, 4)}), Case(([b, s],), {"shape": (b, 1, s, 1)}),
            Case(([b, s, d + 1],), {"shape": (b * s, d + 1)}), Case(([2, b * s, 3],), {"shape": (2, b, s, 3)})]


CASES.update({
    "reshape": _reshape,
    "flatten": lambda rng: [Case((shape(rng, 4),), {"start_dim": 1}), Case((shape(rng, 3),), {"start_dim": 0, "end_dim": 1})],
    "unflatten": lambda rng: [Case(([size(rng), 12],), {"dim": 1, "sizes": (3, -1)}),
                              Case(([6, size(rng)],), {"dim": 0, "sizes": (2, 3)})],
    "unsqueeze": lambda rng: [Case((shape(rng, 2),), {"dim": 1}), Case((shape(rng, 2),), {"dim": -1})],
    "squeeze": lambda rng: [Case(([size(rng), 1, size(rng)],), {"dim": 1}), Case(([1, size(rng), 1],), {})],
    "expand": lambda rng: [Case(([size(rng), 1],), {"size": (3, -1, 5)}), Case(([1, size(rng)],), {"size": (4, -1)})],
    "transpose": lambda rng: [Case((shape(rng, 3),), {"dim0": 1, "dim1": 2}), Case((shape(rng, 2),), {"dim0": 0, "dim1": -1})],
    "permute": lambda rng: [Case((shape(rng, 3),), {"dims": (2, 0, 1)}), Case((shape(rng, 4),), {"dims": (0, 2, 1, 3)})],
    "contiguous": lambda rng: [Case((shape(rng, 3),))],
    "clone": lambda rng: [Case((shape(rng, 2),))],
    "to_copy": lambda rng: [Case((shape(rng, 2),), {"dtype": "float64"}),
                            Case((shape(rng, 2),), {"dtype": "int64"}, ("halves",)),
                            Case((shape(rng, 2),), {"dtype": "bool"}, ("halves",))],
    "cat": lambda rng: [Case(([3, a], [3, b], [3, c]), {"dim": 1}) for a, b, c in [shape(rng, 3)]] + [
        Case(([a, 4], [b, 4]), {"dim": 0}) for a, b in [shape(rng, 2)]],
    "stack": lambda rng: [Case((s, s, s), {"dim": 1}) for s in [shape(rng, 2)]] + [
        Case((s, s), {"dim": 0}) for s in [shape(rng, 2)]],
    "slice": lambda rng: [Case(([size(rng), 9],), {"dim": 1, "start": 2, "end": 8}),
                          Case(([9, size(rng)],), {"dim": 0, "start": 1, "end": None, "step": 2}),
                          Case(([size(rng), 8],), {"dim": -1, "start": -5, "end": -1})],
    "narrow": lambda rng: [Case(([size(rng), 8],), {"dim": 1, "start": 2, "length": 5})],
    "select": lambda rng: [Case((shape(rng, 3),), {"dim": 1, "index": -1}), Case((shape(rng, 2),), {"dim": 0, "index": 1})],
    "pad": lambda rng: [Case((shape(rng, 2),), {"pad": (1, 2)}),
                        Case((shape(rng, 3, 3, 6),), {"pad": (2, -1, 0, 1), "value": -1.5})],
    "triu": lambda rng: [Case((shape(rng, 2, 4, 7),), {"diagonal": 1}), Case((shape(rng, 3, 3, 6),), {"diagonal": -1})],
    "tril": lambda rng: [Case((shape(rng, 2, 4, 7),), {"diagonal": 0}), Case((shape(rng, 3, 3, 6),), {"diagonal": 2})],
    "flip": lambda rng: [Case((shape(rng, 2),), {"dims": (1,)}), Case((shape(rng, 3),), {"dims": (0, 2)})],
    "roll": lambda rng: [Case((shape(rng, 2),), {"shifts": (2,), "dims": (1,)}),
                         Case((shape(rng, 3),), {"shifts": (1, -3), "dims": (0, 2)})],
    "repeat": lambda rng: [Case((shape(rng, 2),), {"repeats": (2, 1, 3)}), Case((shape(rng, 2),), {"repeats": (1, 2)})],
    "repeat_interleave": lambda rng: [Case((shape(rng, 3),), {"repeats": 2, "dim": 1}),
                                      Case((shape(rng, 2),), {"repeats": 3})],
    "index_select": lambda rng: [Case(([7, size(rng)], [size(rng)]), {"dim": 0}, ("normal", "int7")),
                                 Case(([size(rng), 6, 3], [4]), {"dim": 1}, ("normal", "int6"))],
    "gather": lambda rng: [Case(([a, 6], [a, 4]), {"dim": 1}, ("normal", "int6")) for a in [size(rng)]] + [
        Case(([5, b, 3], [3, b, 2]), {"dim": 0}, ("normal", "int5")) for b in [size(rng)]],
    "zeros": lambda rng: [Case((), {"size": tuple(shape(rng, 2))})],
    "ones": lambda rng: [Case((), {"size": tuple(shape(rng, 3))})],
    "full": lambda rng: [Case((), {"size": tuple(shape(rng, 2)), "fill_value": 1.5}), Case((), {"size": (), "fill_value": -2.0})],
    "arange": lambda rng: [Case((), {"start": 1, "end": 8}), Case((), {"start": 0.5, "end": 5, "step": 0.75})],
    "zeros_like": lambda rng: [Case((shape(rng, 2),))],
    "ones_like": lambda rng: [Case((shape(rng, 3),))],
    "full_like": lambda rng: [Case((shape(rng, 2),), {"fill_value": 3.25})],
})

# ---- 3-D pooling, edge padding, diagonals, strided views, scatters ----------------------------


def _pool3d(kind):
    def make(rng):
        lead, spatial = [2, size(rng, 2, 3)], shape(rng, 3, 4, 6)
        cases = [Case((lead + spatial,), {"kernel_size": 2, "stride": 2}),
                 Case((lead + spatial,), {"kernel_size": (3, 2, 2), "stride": 1, "padding": (1, 1, 0)})]
        if kind == "avg":
            cases.append(Case((lead[1:] + spatial,), {"kernel_size": 2, "stride": 1, "padding": 1,
                                                      "count_include_pad": False}))
        return cases
    return make


def _scatter_add(rng):
    a, n, j = size(rng), size(rng, 4, 7), size(rng, 2, 4)
    return [Case(([a, n], [a, j], [a, j]), {"dim": 1}, ("normal", f"int{n}", "normal")),
            Case(([n, 3], [j, 2], [j, 3]), {"dim": 0}, ("normal", f"int{n}", "normal"))]


CASES.update({
    "max_pool3d": _pool3d("max"), "avg_pool3d": _pool3d("avg"),
    "adaptive_avg_pool3d": lambda rng: [Case(([2, size(rng), 4, 6, 3],), {"output_size": (2, 3, 1)}),
                                        Case(([size(rng), 2, 2, 4],), {"output_size": (1, 2, 2)})],
    "reflection_pad": lambda rng: [Case(([2, size(rng), size(rng, 4, 7)],), {"pad": (2, 3)}),
                                   Case(([2, size(rng, 3, 5), size(rng, 4, 6)],), {"pad": (1, 2, 2, 1)})],
    "replication_pad": lambda rng: [Case(([2, size(rng), size(rng)],), {"pad": (3, 1)}),
                                    Case(([1, 2, size(rng), size(rng)],), {"pad": (1, 2, 0, 3)})],
    "diagonal": lambda rng: [Case((shape(rng, 2),), {}), Case((shape(rng, 3),), {"offset": 1, "dim1": 1, "dim2": 2}),
                             Case(([size(rng, 4, 6), 3, size(rng, 4, 6)],), {"offset": -2, "dim1": 2, "dim2": 0})],
    "as_strided": lambda rng: [Case(([4, 6],), {"size": (3, 4), "stride": (6, 1), "storage_offset": 2}),
                               Case(([5, 6],), {"size": (4, 3, 2), "stride": (6, 2, 1), "storage_offset": 1})],
    "scatter_add": _scatter_add,
    "slice_scatter": lambda rng: [Case(([a, 8], [a, 5]), {"dim": 1, "start": 2, "end": 7})
                                  for a in [size(rng)]] + [
        Case(([7, a], [4, a]), {"dim": 0, "start": 1, "end": 5}) for a in [size(rng)]],
    "select_scatter": lambda rng: [Case(([a, b, c], [a, c]), {"dim": 1, "index": -1})
                                   for a, b, c in [shape(rng, 3)]] + [
        Case(([a, b], [b]), {"dim": 0, "index": 1}) for a, b in [shape(rng, 2)]],
})
