"""Elementwise ops: unary math, activations, binary ops with broadcasting, scalar variants."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _unary(fn):
    return lambda inputs, attrs, out_shape: fn(inputs[0])


def _unary_attrs(fn):
    return lambda inputs, attrs, out_shape: fn(inputs[0], **attrs)


def _binary(fn):
    return lambda inputs, attrs, out_shape: fn(inputs[0], inputs[1])


def _scalar(fn):
    return lambda inputs, attrs, out_shape: fn(inputs[0], attrs["other"])


UNARY = {
    "exp": torch.exp, "expm1": torch.expm1, "log": torch.log, "log1p": torch.log1p,
    "log2": torch.log2, "log10": torch.log10, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "neg": torch.neg, "abs": torch.abs, "reciprocal": torch.reciprocal, "erf": torch.erf,
    "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "sinh": torch.sinh, "cosh": torch.cosh,
    "tanh": torch.tanh, "asin": torch.asin, "acos": torch.acos, "atan": torch.atan,
    "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh, "floor": torch.floor,
    "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc, "sign": torch.sign,
    "logical_not": torch.logical_not, "isnan": torch.isnan, "isinf": torch.isinf,
    "relu": torch.relu, "silu": F.silu, "sigmoid": torch.sigmoid, "mish": F.mish,
    "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish,
}

WITH_ATTRS = {
    "gelu": F.gelu,
    "elu": lambda x, alpha, scale, input_scale: torch.ops.aten.elu(x, alpha, scale, input_scale),
    "leaky_relu": F.leaky_relu, "hardtanh": F.hardtanh, "softplus": F.softplus,
    "clamp": lambda x, min, max: torch.clamp(x, min, max),  # noqa: A006
}

BINARY = {
    "mul": torch.mul, "pow": torch.pow, "maximum": torch.maximum, "minimum": torch.minimum,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "fmod": torch.fmod, "remainder": torch.remainder, "atan2": torch.atan2,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
}

SCALAR = {
    "mul_scalar": torch.mul, "eq_scalar": torch.eq, "ne_scalar": torch.ne, "lt_scalar": torch.lt,
    "le_scalar": torch.le, "gt_scalar": torch.gt, "ge_scalar": torch.ge,
    "fmod_scalar": torch.fmod, "remainder_scalar": torch.remainder,
}


def _where(inputs, attrs, out_shape):
    condition, x, y = inputs
    return torch.where(condition.bool() if condition.dtype != torch.bool else condition, x, y)


def _masked_fill(inputs, attrs, out_shape):
    x, mask = inputs
    return torch.masked_fill(x, mask.bool(), attrs["value"]).expand(out_shape)


IMPLS = {
    **{name: _unary(fn) for name, fn in UNARY.items()},
    **{name: _unary_attrs(fn) for name, fn in WITH_ATTRS.items()},
    **{name: _binary(fn) for name, fn in BINARY.items()},
    **{name: _scalar(fn) for name, fn in SCALAR.items()},
    "add": lambda inputs, attrs, out_shape: torch.add(inputs[0], inputs[1], alpha=attrs["alpha"]),
    "sub": lambda inputs, attrs, out_shape: torch.sub(inputs[0], inputs[1], alpha=attrs["alpha"]),
    "div": lambda inputs, attrs, out_shape: torch.div(inputs[0], inputs[1],
                                                      rounding_mode=attrs.get("rounding_mode")),
    "where": _where,
    "masked_fill": _masked_fill,
    "clamp_tensor": lambda inputs, attrs, out_shape: torch.clamp(*inputs),
    "add_scalar": lambda inputs, attrs, out_shape: torch.add(inputs[0], attrs["other"],
                                                             alpha=attrs["alpha"]),
    "sub_scalar": lambda inputs, attrs, out_shape: torch.sub(inputs[0], attrs["other"],
                                                             alpha=attrs["alpha"]),
    "rsub_scalar": lambda inputs, attrs, out_shape: torch.rsub(inputs[0], attrs["other"],
                                                               alpha=attrs["alpha"]),
    "div_scalar": lambda inputs, attrs, out_shape: torch.div(inputs[0], attrs["other"],
                                                             rounding_mode=attrs.get("rounding_mode")),
    "pow_scalar": lambda inputs, attrs, out_shape: torch.pow(inputs[0], attrs["exponent"]),
    "rpow_scalar": lambda inputs, attrs, out_shape: torch.pow(attrs["base"], inputs[0]),
}
