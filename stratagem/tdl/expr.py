"""Value expressions of the TDL (Tofu §4.1): what an output element is computed from.

    value := Access(tensor, indices, pad)        tensor element, `pad` outside its bounds
           | Const(c) | IndexValue(index-expr)   a constant, an index used as a number
           | Apply(fn, args)                     elementwise math: add, mul, exp, tanh, eq, ...
           | Where(cond, a, b)                   cond over indices (narrows ranges) or over values
           | Reduce(reducer, vars, body)         Sum, Max, Min, Prod over new index variables
           | OpaqueResult(call, indices)         an element of an opaque function's result

Descriptions are side-effect free and not Turing-complete; Python functions compose them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stratagem.errors import TDLError
from stratagem.tdl.indexing import IndexCond, IndexExpr, IndexProduct, IndexVar, as_index

UNARY = frozenset({"neg", "abs", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos",
                   "tanh", "sigmoid", "erf", "floor", "ceil", "round", "sign", "reciprocal",
                   "trunc", "not", "asin", "acos", "atan", "uniform"})
BINARY = frozenset({"add", "sub", "mul", "div", "pow", "max", "min", "eq", "ne", "lt", "le", "gt",
                    "ge", "and", "or", "fmod", "remainder", "atan2"})
REDUCERS = ("sum", "max", "min", "prod")


class Value:
    """Base of value expressions; Python arithmetic builds `Apply` nodes."""

    __slots__ = ()

    def __add__(self, o: Any) -> "Value":
        return apply("add", self, o)

    def __radd__(self, o: Any) -> "Value":
        return apply("add", o, self)

    def __sub__(self, o: Any) -> "Value":
        return apply("sub", self, o)

    def __rsub__(self, o: Any) -> "Value":
        return apply("sub", o, self)

    def __mul__(self, o: Any) -> "Value":
        return apply("mul", self, o)

    def __rmul__(self, o: Any) -> "Value":
        return apply("mul", o, self)

    def __truediv__(self, o: Any) -> "Value":
        return apply("div", self, o)

    def __rtruediv__(self, o: Any) -> "Value":
        return apply("div", o, self)

    def __pow__(self, o: Any) -> "Value":
        return apply("pow", self, o)

    def __rpow__(self, o: Any) -> "Value":
        return apply("pow", o, self)

    def __neg__(self) -> "Value":
        return apply("neg", self)

    def __lt__(self, o: Any) -> "Value":
        return apply("lt", self, o)

    def __le__(self, o: Any) -> "Value":
        return apply("le", self, o)

    def __gt__(self, o: Any) -> "Value":
        return apply("gt", self, o)

    def __ge__(self, o: Any) -> "Value":
        return apply("ge", self, o)

    def __eq__(self, o: Any) -> "Value":  # type: ignore[override]
        return apply("eq", self, o)

    def __ne__(self, o: Any) -> "Value":  # type: ignore[override]
        return apply("ne", self, o)

    def __bool__(self) -> bool:
        raise TDLError("a TDL value was used as a Python bool",
                       hint="Use tdl.where(condition, a, b) instead of `if` or `and`/`or`")

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class Full:
    """`:` in an access: the whole dimension (only inside arguments of an opaque function)."""


FULL = Full()


@dataclass(frozen=True, eq=False)
class Access(Value):
    tensor: Any                              # trace.TensorRef
    indices: tuple[Any, ...]                 # IndexExpr per dim, or FULL
    pad: float | None = None                 # value read outside bounds; None: must stay inside

    def __repr__(self) -> str:
        idx = ", ".join(":" if i is FULL else repr(i) for i in self.indices)
        return f"{self.tensor.name}[{idx}]"


@dataclass(frozen=True, eq=False)
class Const(Value):
    value: float

    def __repr__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True, eq=False)
class IndexValue(Value):
    index: Any  # IndexExpr or IndexProduct

    def __repr__(self) -> str:
        return f"<{self.index!r}>"


@dataclass(frozen=True, eq=False)
class Apply(Value):
    fn: str
    args: tuple[Value, ...]

    def __repr__(self) -> str:
        return f"{self.fn}({', '.join(map(repr, self.args))})"


@dataclass(frozen=True, eq=False)
class Where(Value):
    cond: Any          # IndexCond (narrows index ranges per branch) or a Value
    then: Value
    otherwise: Value

    def __repr__(self) -> str:
        return f"where({self.cond!r}, {self.then!r}, {self.otherwise!r})"


@dataclass(frozen=True, eq=False)
class Reduce(Value):
    reducer: str
    vars: tuple[IndexVar, ...]
    body: Value
    extents: tuple[tuple[str, int], ...] = ()   # explicit extents by variable name

    def __repr__(self) -> str:
        names = ", ".join(v.name for v in self.vars)
        return f"{self.reducer.capitalize()}(lambda {names}: {self.body!r})"


@dataclass(frozen=True, eq=False)
class OpaqueCall:
    fn: "Opaque"
    args: tuple[Access, ...]

    def __getitem__(self, index: Any) -> "OpaqueResult":
        index = index if isinstance(index, tuple) else (index,)
        converted = tuple(as_index(i) for i in index)
        if any(i is None for i in converted):
            raise TDLError(f"opaque function {self.fn.name!r} indexed by a non-index",
                           expected="index variables or integers", got=repr(index))
        return OpaqueResult(self, tuple(i.to_affine() for i in converted))


@dataclass(frozen=True, eq=False)
class OpaqueResult(Value):
    call: OpaqueCall
    indices: tuple[IndexExpr, ...]

    def __repr__(self) -> str:
        args = ", ".join(map(repr, self.call.args))
        return f"{self.call.fn.name}({args})[{', '.join(map(repr, self.indices))}]"


@dataclass(frozen=True, eq=False)
class Opaque:
    """A function TDL does not look inside (Tofu's `Cholesky = tofu.Opaque()`).

    `impl(*arrays)` computes it in numpy on arrays whose leading axes are batch axes; its result's
    trailing axes are those the description indexes. `result_shape(*arg_shapes)` gives them.
    """

    name: str
    impl: Callable[..., np.ndarray] | None = None
    result_shape: Callable[..., tuple[int, ...]] | None = None
    flops_per_call: Callable[..., float] | None = field(default=None)

    def __call__(self, *args: Any) -> OpaqueCall:
        for a in args:
            if not isinstance(a, Access):
                raise TDLError(f"opaque function {self.name!r} takes tensor slices",
                               expected="accesses such as batch_mat[b, :, :]", got=repr(a))
        return OpaqueCall(self, tuple(args))


def to_value(x: Any) -> Value:
    if isinstance(x, Value):
        return x
    if isinstance(x, (IndexExpr, IndexProduct)):
        return IndexValue(x)
    if isinstance(x, (int, float, bool, np.number)):
        return Const(float(x))
    if isinstance(x, IndexCond):
        raise TDLError(f"index condition `{x!r}` used as a value",
                       hint="Use tdl.where(condition, 1.0, 0.0) to turn it into a number")
    raise TDLError("not a TDL value", expected="a tensor element, number or index", got=repr(x))


def apply(fn: str, *args: Any) -> Value:
    if fn not in (UNARY if len(args) == 1 else BINARY):
        raise TDLError(f"unknown elementwise function {fn!r} with {len(args)} argument(s)",
                       expected=f"one of {sorted(UNARY | BINARY)}", got=fn)
    return Apply(fn, tuple(to_value(a) for a in args))


def where(cond: Any, then: Any, otherwise: Any) -> Value:
    if not isinstance(cond, IndexCond):
        cond = to_value(cond)
    return Where(cond, to_value(then), to_value(otherwise))


def _reducer(kind: str) -> Callable[..., Reduce]:
    def reduce(fn: "Callable | Compute", **extents: int) -> Reduce:
        if isinstance(fn, Compute):
            names, call = tuple(fn.names), fn.fn
        else:
            names, call = lambda_parameter_names(fn, f"{kind.capitalize()}(...)"), fn
        variables = tuple(IndexVar(n) for n in names)
        body = to_value(call(*variables))
        return Reduce(kind, variables, body, tuple(sorted(extents.items())))
    reduce.__name__ = kind.capitalize()
    reduce.__doc__ = (f"{kind.capitalize()}(lambda i, j: body): {kind} of body over new indices i, j; "
                      f"or {kind.capitalize()}(Compute(names, fn)) for a rank-generic reduction.")
    return reduce


Sum, Max, Min, Prod = (_reducer(k) for k in REDUCERS)


def lambda_parameter_names(fn: Callable, where_used: str) -> tuple[str, ...]:
    if not callable(fn):
        raise TDLError(f"{where_used} needs a lambda", got=repr(fn))
    params = inspect.signature(fn).parameters.values()
    names = tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        raise TDLError(f"{where_used}: a lambda with *args has no index names",
                       hint="Use tdl.Compute(names, fn) for rank-generic descriptions")
    return names


@dataclass(frozen=True)
class Compute:
    """Explicit form of `lambda i0, i1, ...: body` for descriptions whose rank depends on shapes."""

    names: Sequence[str]
    fn: Callable[..., Any]


# elementwise math that descriptions call: tdl.exp(x), tdl.maximum(a, b), ...
def _unary(name: str) -> Callable[[Any], Value]:
    f = lambda x: apply(name, x)  # noqa: E731
    f.__name__ = name
    return f


exp, log, log1p, expm1, sqrt, rsqrt, tanh, sigmoid, erf, sin, cos = (
    _unary(n) for n in ("exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
                        "sin", "cos"))
absolute, floor, ceil, round_, sign, reciprocal, trunc, logical_not = (
    _unary(n) for n in ("abs", "floor", "ceil", "round", "sign", "reciprocal", "trunc", "not"))
asin, acos, atan = (_unary(n) for n in ("asin", "acos", "atan"))
uniform = _unary("uniform")
uniform.__doc__ = "uniform(n): a random number in [0, 1), a fixed function of the integer n (tdl.rng)"


def atan2(a: Any, b: Any) -> Value:
    return apply("atan2", a, b)


def maximum(a: Any, b: Any) -> Value:
    return apply("max", a, b)


def minimum(a: Any, b: Any) -> Value:
    return apply("min", a, b)


def logical_and(a: Any, b: Any) -> Value:
    return apply("and", a, b)


def logical_or(a: Any, b: Any) -> Value:
    return apply("or", a, b)


def walk(value: Value):
    """Yield every value node under `value`, parents before children."""
    stack = [value]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def children(node: Value) -> tuple[Value, ...]:
    if isinstance(node, Apply):
        return node.args
    if isinstance(node, Where):
        cond = () if isinstance(node.cond, IndexCond) else (node.cond,)
        return (*cond, node.then, node.otherwise)
    if isinstance(node, Reduce):
        return (node.body,)
    if isinstance(node, OpaqueResult):
        return node.call.args
    return ()
