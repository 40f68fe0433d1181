"""TDL: operators described by what they compute; their partitions derived by analysis (Tofu §4)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stratagem.errors import TDLError
from stratagem.tdl.analysis import KINDS, Analysis, Dim, Split, WorkerShare
from stratagem.tdl.expr import (
    Compute, Max, Min, Opaque, Prod, Sum, absolute, acos, asin, atan, atan2, ceil, cos, erf, exp, expm1, floor, log, log1p,
    logical_and, logical_not, logical_or, maximum, minimum, reciprocal, round_, rsqrt, sigmoid, sign,
    sin, sqrt, tanh, trunc, where,
)
from stratagem.tdl.library import LIBRARY
from stratagem.tdl.trace import Description, OpDef, op


def lookup(name: str) -> OpDef:
    try:
        return LIBRARY[name]
    except KeyError:
        close = [n for n in LIBRARY if n.startswith(name[:3])][:8]
        raise TDLError(f"no operator {name!r} in the TDL library",
                       expected=f"one of {len(LIBRARY)} ops, e.g. {close or list(LIBRARY)[:8]}",
                       got=repr(name), hint="Run `stratagem ops` to list them") from None


def analyze(name_or_op: str | OpDef, *input_shapes: Sequence[int] | None,
            weights: Sequence[bool] | None = None, sample_dims: Sequence[int | None] | None = None,
            **attrs: Any) -> Analysis:
    """Analyze an operator at concrete input shapes: its dims, kinds and per-worker regions."""
    opdef = lookup(name_or_op) if isinstance(name_or_op, str) else name_or_op
    return Analysis(opdef.describe(*input_shapes, weights=weights, **attrs), sample_dims)


__all__ = [
    "KINDS", "LIBRARY", "Analysis", "Compute", "Description", "Dim", "Max", "Min", "Opaque", "OpDef",
    "Prod", "Split", "Sum", "WorkerShare", "absolute", "acos", "asin", "atan", "atan2", "analyze", "ceil", "cos", "erf", "exp", "expm1",
    "floor", "log", "log1p", "logical_and", "logical_not", "logical_or", "lookup", "maximum",
    "minimum", "op", "reciprocal", "round_", "rsqrt", "sigmoid", "sign", "sin", "sqrt", "tanh",
    "trunc", "where",
]
