"""Activation functions, any rank: elementwise, attributes as in ATen."""

from __future__ import annotations

import math

from stratagem.errors import TDLError
from stratagem.tdl.expr import erf, exp, log1p, maximum, minimum, sigmoid as _sigmoid, tanh, where
from stratagem.tdl.library.common import pointwise
from stratagem.tdl.trace import op

EXAMPLE = ([5, 6],)


@op(saves="output", example=EXAMPLE)
def relu(x):
    """max(x, 0)"""
    return pointwise("relu", (x,), lambda v: maximum(v, 0.0))


@op(example=(EXAMPLE, {"approximate": "tanh"}))
def gelu(x, *, approximate="none"):
    """x * Phi(x), exact (erf) or with the tanh approximation (GPT-2's gelu_new)."""
    if approximate == "none":
        return pointwise("gelu", (x,), lambda v: 0.5 * v * (1.0 + erf(v * (1.0 / math.sqrt(2.0)))))
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        return pointwise("gelu", (x,), lambda v: 0.5 * v * (1.0 + tanh(c * (v + 0.044715 * v * v * v))))
    raise TDLError("op 'gelu': unknown approximation", expected="'none' or 'tanh'", got=repr(approximate))


@op(example=EXAMPLE)
def silu(x):
    """x * sigmoid(x) (swish), LLaMA's MLP activation."""
    return pointwise("silu", (x,), lambda v: v * _sigmoid(v))


@op(saves="output", example=EXAMPLE)
def sigmoid(x):
    """1 / (1 + e^-x)"""
    return pointwise("sigmoid", (x,), _sigmoid)


@op(example=EXAMPLE)
def elu(x, *, alpha=1.0, scale=1.0, input_scale=1.0):
    """scale * x for x > 0, else scale * alpha * (e^(input_scale x) - 1)."""
    return pointwise("elu", (x,), lambda v: where(
        v > 0.0, scale * v, scale * alpha * (exp(v * input_scale) - 1.0)))


@op(example=EXAMPLE)
def leaky_relu(x, *, negative_slope=0.01):
    """x for x > 0, else negative_slope * x."""
    return pointwise("leaky_relu", (x,), lambda v: where(v > 0.0, v, v * negative_slope))


@op(example=EXAMPLE)
def hardtanh(x, *, min_val=-1.0, max_val=1.0):
    """x clamped to [min_val, max_val] (relu6 is hardtanh(0, 6))."""
    return pointwise("hardtanh", (x,), lambda v: minimum(maximum(v, min_val), max_val))


@op(example=EXAMPLE)
def softplus(x, *, beta=1.0, threshold=20.0):
    """log(1 + e^(beta x)) / beta, or x where beta x > threshold."""
    return pointwise("softplus", (x,), lambda v: where(
        v * beta > threshold, v, log1p(exp(v * beta)) / beta))


@op(example=EXAMPLE)
def mish(x):
    """x * tanh(softplus(x))"""
    return pointwise("mish", (x,), lambda v: v * tanh(where(v > 20.0, v, log1p(exp(v)))))


@op(example=EXAMPLE)
def hardsigmoid(x):
    """min(max(x + 3, 0), 6) / 6"""
    return pointwise("hardsigmoid", (x,), lambda v: minimum(maximum(v + 3.0, 0.0), 6.0) / 6.0)


@op(example=EXAMPLE)
def hardswish(x):
    """x * min(max(x + 3, 0), 6) / 6"""
    return pointwise("hardswish", (x,), lambda v: v * minimum(maximum(v + 3.0, 0.0), 6.0) / 6.0)
