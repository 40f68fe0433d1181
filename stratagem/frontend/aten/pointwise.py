"""Elementwise ATen ops: unary math, activations, binary ops (tensor or scalar operand)."""

from __future__ import annotations

from stratagem.frontend.aten.common import Converted, Intermediate, bind, dtype_name, is_tensor, one, overload_exists

UNARY = ["abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "erf",
         "exp", "expm1", "floor", "log", "log10", "log1p", "log2", "neg", "reciprocal", "relu",
         "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "trunc", "logical_not",
         "isnan", "isinf", "silu", "mish", "hardsigmoid", "hardswish"]

# aten op -> (tensor-tensor TDL op, tensor-scalar TDL op)
BINARY = {"add": ("add", "add_scalar"), "sub": ("sub", "sub_scalar"), "mul": ("mul", "mul_scalar"),
          "div": ("div", "div_scalar"), "eq": ("eq", "eq_scalar"), "ne": ("ne", "ne_scalar"),
          "lt": ("lt", "lt_scalar"), "le": ("le", "le_scalar"), "gt": ("gt", "gt_scalar"),
          "ge": ("ge", "ge_scalar"), "fmod": ("fmod", "fmod_scalar"),
          "remainder": ("remainder", "remainder_scalar"), "pow": ("pow", "pow_scalar")}


def _unary(kind, **fixed):
    return lambda node: one(kind, [node.args[0]], **fixed)


def _with_attrs(kind, *names):
    def convert(node):
        args = bind(node)
        return one(kind, [args["self"]], **{n: args[n] for n in names})
    return convert


def _binary(name):
    tensor_kind, scalar_kind = BINARY[name]

    def convert(node):
        args = bind(node)
        x, other = args["self"], args.get("other", args.get("exponent"))
        extra = {k: args[k] for k in ("alpha", "rounding_mode") if k in args}
        if is_tensor(other):
            return one(tensor_kind, [x, other], **extra)
        if name == "pow":
            return one(scalar_kind, [x], exponent=other)
        return one(scalar_kind, [x], other=other, **extra)
    return convert


def _rsub(node):
    args = bind(node)
    if is_tensor(args["other"]):
        return one("sub", [args["other"], args["self"]], alpha=args["alpha"])
    return one("rsub_scalar", [args["self"]], other=args["other"], alpha=args["alpha"])


def _logical(kind):
    """bitwise ops are logical ops on bool tensors; on integers they are not described."""
    def convert(node):
        args = bind(node)
        tensors = [a for a in (args["self"], args.get("other")) if a is not None]
        if any(not is_tensor(t) or dtype_name(t) != "bool" for t in tensors):
            return None
        return one(kind, tensors)
    return convert


def _logical_scalar(name):
    """bool tensor op bool scalar: and/or/xor with a constant is the tensor, a constant, or not."""
    def convert(node):
        args = bind(node)
        x, other = args["self"], bool(args["other"])
        if dtype_name(x) != "bool":
            return None
        if name == "and":
            return one("clone", [x]) if other else one("zeros_like", [x])
        if name == "or":
            return one("ones_like", [x]) if other else one("clone", [x])
        return one("logical_not", [x]) if other else one("clone", [x])
    return convert


def _clamp(node):
    args = bind(node)
    return one("clamp", [args["self"]], min=args["min"], max=args["max"])


def _clamp_tensor(node):
    args = bind(node)
    low, high = args["min"], args["max"]
    if low is not None and high is not None:
        return one("clamp_tensor", [args["self"], low, high])
    if low is not None:
        return one("maximum", [args["self"], low])
    return one("minimum", [args["self"], high]) if high is not None else one("clone", [args["self"]])


def _where(node):
    args = bind(node)
    if not all(is_tensor(args[k]) for k in ("condition", "self", "other")):
        return None
    return one("where", [args["condition"], args["self"], args["other"]])


def _where_scalar(node):
    """where(condition, x, scalar) = masked_fill(x, not condition, scalar); T5's position buckets."""
    args = bind(node)
    x, other = args["self"], args["other"]
    if not is_tensor(args["condition"]) or not is_tensor(x) or is_tensor(other):
        return None
    fill = one("masked_fill", [x, Intermediate(0)], value=other)
    return None if fill is None else [Converted("logical_not", (args["condition"],), {}, None), *fill]


def _masked_fill(node):
    args = bind(node)
    if is_tensor(args["value"]):
        return None
    return one("masked_fill", [args["self"], args["mask"]], value=args["value"])


CONVERTERS = {
    **{f"aten.{name}.default": _unary(name) for name in UNARY},
    "aten.gelu.default": _with_attrs("gelu", "approximate"),
    "aten.elu.default": _with_attrs("elu", "alpha", "scale", "input_scale"),
    "aten.leaky_relu.default": _with_attrs("leaky_relu", "negative_slope"),
    "aten.hardtanh.default": _with_attrs("hardtanh", "min_val", "max_val"),
    "aten.relu6.default": _unary("hardtanh", min_val=0.0, max_val=6.0),
    "aten.softplus.default": _with_attrs("softplus", "beta", "threshold"),
    "aten.clamp.default": _clamp,
    "aten.clamp.Tensor": _clamp_tensor,
    "aten.where.self": _where,
    "aten.where.ScalarOther": _where_scalar,
    "aten.masked_fill.Scalar": _masked_fill,
    "aten.maximum.default": lambda node: one("maximum", node.args[:2]),
    "aten.minimum.default": lambda node: one("minimum", node.args[:2]),
    "aten.min.other": lambda node: one("minimum", node.args[:2]),
    "aten.max.other": lambda node: one("maximum", node.args[:2]),
    "aten.atan2.default": lambda node: one("atan2", node.args[:2]),
    "aten.logical_and.default": lambda node: one("logical_and", node.args[:2]),
    "aten.logical_or.default": lambda node: one("logical_or", node.args[:2]),
    "aten.logical_xor.default": lambda node: one("logical_xor", node.args[:2]),
    "aten.bitwise_and.Tensor": _logical("logical_and"),
    "aten.bitwise_or.Tensor": _logical("logical_or"),
    "aten.bitwise_xor.Tensor": _logical("logical_xor"),
    "aten.bitwise_not.default": _logical("logical_not"),
    "aten.bitwise_and.Scalar": _logical_scalar("and"),
    "aten.bitwise_or.Scalar": _logical_scalar("or"),
    "aten.bitwise_xor.Scalar": _logical_scalar("xor"),
    "aten.__and__.Scalar": _logical_scalar("and"),
    "aten.__or__.Scalar": _logical_scalar("or"),
    "aten.__xor__.Scalar": _logical_scalar("xor"),
    "aten.__and__.Tensor": _logical("logical_and"),
    "aten.__or__.Tensor": _logical("logical_or"),
    "aten.__xor__.Tensor": _logical("logical_xor"),
    "aten.rsub.Scalar": _rsub,
    "aten.rsub.Tensor": _rsub,
    "aten.pow.Scalar": lambda node: one("rpow_scalar", [bind(node)["exponent"]], base=bind(node)["self"]),
    "aten.round.default": _unary("round"),
}
CONVERTERS.update({f"aten.{name}.{overload}": _binary(name) for name in BINARY
                   for overload in ("Tensor", "Scalar", "Tensor_mode", "Scalar_mode", "Tensor_Tensor",
                                    "Tensor_Scalar") if overload_exists(name, overload)
                   and f"aten.{name}.{overload}" not in CONVERTERS})
