"""Declaring operators (`@op`) and tracing them into descriptions.

An operator is declared once, as what it computes (Tofu Fig. 3):

    @op(weights=("filters",))
    def conv1d(data, filters):
        return lambda b, co, x: Sum(lambda ci, dx: data[b, ci, x + dx] * filters[ci, co, dx])

Positional parameters are tensors (a default of None makes one optional; `*xs` takes any number);
keyword-only parameters are attributes. Tracing (`OpDef.describe`) calls the function with
`TensorRef`s of concrete shapes, calls the returned lambda with fresh `IndexVar`s named after its
parameters, and then:

1. infers each index's extent (`_infer_extents`): from `shape=` when given, from `extent=` of a
   reducer, from a dimension the index addresses directly, or else from the tightest in-bounds
   constraint of an affine access (so `x + dx` gives conv1d's X - DX + 1);
2. simplifies floor-divisions and remainders that the ranges make affine (`indexing.simplify`);
3. checks every unpadded access stays in bounds (`_check_bounds`), which is the op's shape check.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from stratagem.errors import TDLError
from stratagem.tdl.expr import (
    FULL, Access, Apply, Compute, Const, IndexValue, OpaqueCall, OpaqueResult, Reduce, Value, Where,
    lambda_parameter_names, to_value, walk,
)
from stratagem.tdl.indexing import (
    INT_DOMAIN, Affine, IndexCond, IndexExpr, IndexProduct, IndexVar, bounds, simplify,
)
from stratagem.tdl.regions import full_ranges, iter_accesses


@dataclass(frozen=True, eq=False)
class TensorRef:
    """An operator input during tracing: indexing it builds an `Access`."""

    name: str
    shape: tuple[int, ...]
    position: int
    is_weight: bool
    op_name: str

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, index: Any) -> Access:
        return make_access(self, index, None)

    def padded(self, value: float = 0.0) -> "PaddedRef":
        """Reads outside the tensor's bounds give `value` (zero padding, -inf for max pooling)."""
        return PaddedRef(self, float(value))

    def __repr__(self) -> str:
        return f"{self.name}{list(self.shape)}"


@dataclass(frozen=True, eq=False)
class PaddedRef:
    ref: TensorRef
    pad: float

    def __getitem__(self, index: Any) -> Access:
        return make_access(self.ref, index, self.pad)


def make_access(ref: TensorRef, index: Any, pad: float | None) -> Access:
    index = index if isinstance(index, tuple) else (index,)
    if len(index) != ref.ndim:
        raise TDLError(f"op {ref.op_name!r}: access {ref.name}[...] has {len(index)} indices",
                       expected=f"{ref.ndim} (the rank of {ref.name})", got=str(len(index)))
    return Access(ref, tuple(_index_entry(ref, i) for i in index), pad)


def _index_entry(ref: TensorRef, i: Any) -> Any:
    if isinstance(i, slice):
        if i == slice(None):
            return FULL
        raise TDLError(f"op {ref.op_name!r}: slice {i} in {ref.name}[...]",
                       expected="':' (the whole dimension) or an index expression", got=str(i))
    if isinstance(i, bool):
        raise TDLError(f"op {ref.op_name!r}: bool used as an index of {ref.name}", got=repr(i))
    if isinstance(i, int):
        return Affine((), i)
    if isinstance(i, IndexProduct):
        raise TDLError(f"op {ref.op_name!r}: index `{i!r}` of {ref.name} is a product of two indices",
                       expected="affine index arithmetic (Tofu §4.2)", got=repr(i),
                       hint="Describe the op with an opaque function if it cannot be affine")
    if isinstance(i, IndexExpr):
        return i.to_affine()
    if isinstance(i, Value):
        raise TDLError(f"op {ref.op_name!r}: data-dependent index `{i!r}` in {ref.name}[...]",
                       expected="indices computed from lambda parameters only",
                       hint="Compare the data with a reduction index instead: "
                            "Sum(lambda v: where(ids[b] == v, table[v, d], 0))")
    raise TDLError(f"op {ref.op_name!r}: unsupported index {i!r} in {ref.name}[...]")


@dataclass(frozen=True, eq=False)
class Description:
    """A traced operator: output indices, output values, and every index's extent."""

    op_name: str
    attrs: Mapping[str, Any]
    inputs: tuple[TensorRef, ...]
    output_vars: tuple[IndexVar, ...]
    outputs: tuple[Value, ...]
    extents: Mapping[int, int]                    # uid -> extent, for every index variable
    flops_override: Callable[..., float] | None = None

    @property
    def output_shape(self) -> tuple[int, ...]:
        return tuple(self.extents[v.uid] for v in self.output_vars)

    @property
    def num_outputs(self) -> int:
        return len(self.outputs)

    def all_vars(self) -> dict[int, IndexVar]:
        found = {v.uid: v for v in self.output_vars}
        for out in self.outputs:
            for node in walk(out):
                if isinstance(node, Reduce):
                    found.update((v.uid, v) for v in node.vars)
        return found

    def __str__(self) -> str:
        args = ", ".join(f"{r.name}{list(r.shape)}" for r in self.inputs)
        names = ", ".join(v.name for v in self.output_vars)
        bodies = "; ".join(repr(o) for o in self.outputs)
        return f"{self.op_name}({args}) = lambda {names}: {bodies}"


# What an op's output is, when it is a PyTorch view of its input (it allocates nothing):
#   "reshape"  reshape, flatten, unflatten: a view only of a contiguous input (else a copy)
#   "strided"  transpose, permute, expand, ...: a view whose result is not contiguous
#   "plain"    squeeze, unsqueeze, slicing: a view that keeps its input's contiguity
VIEWS = ("reshape", "strided", "plain")
# What autograd keeps for the op's backward (derivatives.yaml), when capture did not record it:
#   "nothing"  its gradient needs no values (add, sub, neg, cat, every view), or only integer
#              indices (embedding, index_select, a loss's targets: one element per row, not counted)
#   "output"   its gradient is written in its output (softmax, relu, sigmoid, tanh, exp)
#   "inputs"   every input that is not a weight or buffer (a linear keeps x to form dW = x^T dY)
#   "inputs_and_output"  both (amax, logsumexp, pow, prod, std)
# Buffers a kernel makes for its own backward that are neither (cross-entropy's log-probabilities,
# RMSNorm's normalized input) are `keeps_inside`, in multiples of its first input's bytes; small ones
# (max-pool indices, a norm's per-row statistics) are not counted.
SAVES = ("nothing", "output", "inputs", "inputs_and_output")


@dataclass(frozen=True)
class OpDef:
    """A library operator: its describing function and declaration."""

    name: str
    fn: Callable[..., Any] = field(repr=False)
    weights: frozenset[str] = frozenset()
    shape: Callable[..., Any] | None = field(default=None, repr=False)
    flops: Callable[..., float] | None = field(default=None, repr=False)
    doc: str = ""
    example: tuple[tuple[Any, ...], dict[str, Any]] | None = field(default=None, repr=False)
    view: str | None = None        # its output is a PyTorch view of its input: VIEWS says which kind
    saves: str = "inputs"          # what autograd keeps for its backward: SAVES
    follows: bool = False          # a shape or copy op: coarsening groups it with its producer
    float32_math: str = "float32"  # the precision PyTorch computes its float32 math in by default
    matrix_engine: bool = False    # its kernels run on the matrix engine though its description is
                                   # not one contraction (attention: two around a softmax)
    keeps_inside: tuple[tuple[float, str | None], ...] = ()
                                   # what its kernel keeps for backward beyond `saves`: terms
                                   # (multiple of its first input's local bytes, the optional input
                                   # that must be given for it, or None): RMSNorm keeps x * rstd to
                                   # form its weight's gradient, ((1.0, "weight"),)
    output_like_input: bool = False   # its kernel lays its output out in memory as its first
                                      # input lies (fused attention: a decoder's query is a
                                      # transposed [B, L, H, E], and so is the output)
    fused_saves: bool = False      # the runtime runs it as one fused kernel that keeps what `saves`
                                   # says, whatever capture saw a decomposed reference keep
    gemm: bool = False             # PyTorch runs it as a BLAS matrix product over its operands'
                                   # last dims (cuBLAS's tensor-core kernels want each row to span
                                   # a multiple of 4 bytes at least: cost.compute.rows_aligned)

    def __post_init__(self) -> None:
        if self.view not in (None, *VIEWS) or self.saves not in SAVES:
            raise TDLError(f"op {self.name!r}: unknown view or saves", expected=f"view in {VIEWS}, saves in {SAVES}",
                           got=f"view={self.view!r}, saves={self.saves!r}")
        params = [p.name for p in self.tensor_params]
        if any(m < 0 or (w is not None and w not in params) for m, w in self.keeps_inside):
            raise TDLError(f"op {self.name!r}: keeps_inside holds (multiple of the first input's bytes, "
                           f"an optional input's name or None)", expected=f"multiples >= 0, names in {params}",
                           got=repr(self.keeps_inside))
        if self.view is not None and self.saves != "nothing":
            raise TDLError(f"op {self.name!r} is a view, so its backward keeps nothing",
                           expected='saves="nothing"', got=repr(self.saves))

    def describe_example(self) -> Description:
        """Trace at the declared example shapes (what `stratagem ops` lists)."""
        if self.example is None:
            raise TDLError(f"op {self.name!r} declares no example", hint="Add @op(example=...)")
        shapes, attrs = self.example
        return self.describe(*shapes, **attrs)

    @property
    def signature(self) -> inspect.Signature:
        return inspect.signature(self.fn)

    @property
    def tensor_params(self) -> tuple[inspect.Parameter, ...]:
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                 inspect.Parameter.VAR_POSITIONAL)
        return tuple(p for p in self.signature.parameters.values() if p.kind in kinds)

    @property
    def attr_params(self) -> tuple[inspect.Parameter, ...]:
        return tuple(p for p in self.signature.parameters.values()
                     if p.kind is inspect.Parameter.KEYWORD_ONLY)

    def describe(self, *input_shapes: Sequence[int] | None, weights: Sequence[bool] | None = None,
                 **attrs: Any) -> Description:
        """Trace with concrete input shapes (None for an absent optional tensor)."""
        refs, call_args = self._bind_inputs(input_shapes, weights)
        attrs = self._bind_attrs(attrs)
        result = self.fn(*call_args, **attrs)
        return _trace(self, refs, attrs, result)

    def _bind_inputs(self, shapes: Sequence[Any], weights: Sequence[bool] | None
                     ) -> tuple[tuple[TensorRef, ...], list[Any]]:
        params = self.tensor_params
        variadic = params and params[-1].kind is inspect.Parameter.VAR_POSITIONAL
        fixed = params[:-1] if variadic else params
        required = [p for p in fixed if p.default is inspect.Parameter.empty]
        if len(shapes) < len(required) or (not variadic and len(shapes) > len(fixed)):
            names = ", ".join(p.name for p in fixed) + (", *" + params[-1].name if variadic else "")
            raise TDLError(f"op {self.name!r} called with {len(shapes)} input shape(s)",
                           expected=f"inputs ({names})", got=str(list(shapes)))
        present = [s for s in shapes if s is not None]
        if weights is not None and len(weights) != len(present):
            raise TDLError(f"op {self.name!r}: weight flags do not match the inputs",
                           expected=f"{len(present)} flags", got=str(list(weights)))
        refs: list[TensorRef] = []
        call_args: list[Any] = []
        for i, shape in enumerate(shapes):
            pname = fixed[i].name if i < len(fixed) else f"{params[-1].name}{i - len(fixed)}"
            if shape is None:
                call_args.append(None)
                continue
            is_weight = (weights[len(refs)] if weights is not None
                         else (i < len(fixed) and pname in self.weights))
            ref = TensorRef(pname, tuple(int(s) for s in shape), len(refs), bool(is_weight), self.name)
            refs.append(ref)
            call_args.append(ref)
        return tuple(refs), call_args

    def attrs_with_defaults(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        """The op's attributes with defaults filled in (what `TORCH_OPS` implementations take)."""
        return self._bind_attrs(attrs)

    def _bind_attrs(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        known = {p.name: p for p in self.attr_params}
        unknown = sorted(set(attrs) - set(known))
        if unknown:
            raise TDLError(f"op {self.name!r} got unknown attributes {unknown}",
                           expected=f"some of {sorted(known)}", got=str(unknown))
        bound = {n: p.default for n, p in known.items() if p.default is not inspect.Parameter.empty}
        bound.update(attrs)
        missing = sorted(set(known) - set(bound))
        if missing:
            raise TDLError(f"op {self.name!r} is missing attributes {missing}")
        return bound


def op(fn: Callable | None = None, *, name: str | None = None, weights: Sequence[str] = (),
       shape: Callable[..., Any] | None = None, flops: Callable[..., float] | None = None,
       example: tuple[Sequence[Any], Mapping[str, Any]] | Sequence[Any] | None = None,
       view: str | None = None, saves: str | None = None, follows: bool = False,
       float32_math: str = "float32", matrix_engine: bool = False,
       keeps_inside: Sequence[tuple[float, str | None]] = (), fused_saves: bool = False,
       output_like_input: bool = False, gemm: bool = False) -> Any:
    """Declare an operator by what it computes. See the module docstring.

    `weights`: the tensor parameters that are weights. `shape(*inputs, **attrs)`: the output shape,
    when the accesses do not pin it (padding, concatenation). `flops(dims, input_shapes, **attrs)`:
    FLOPs of one worker from its local dim extents, when the description's own count would be wrong
    (gathers written as one-hot sums). `example`: input shapes, or (input shapes, attrs), to list.
    `view`, `saves`, `follows`: the op's facts for memory, the simulator and coarsening (VIEWS,
    SAVES above); a view saves nothing and follows its producer. `float32_math`: the precision of
    its float32 math under PyTorch's defaults, "tfloat32" for cuDNN convolutions
    (`torch.backends.cudnn.allow_tf32` is True; matmuls stay IEEE float32), which the cost model
    prices on a device's TF32 peak where it has one. `matrix_engine`: PyTorch's kernels for it run
    on the matrix engine (tensor cores), though its description is not a single contraction that
    the cost model would recognise (attention, a fused LSTM cell). `keeps_inside`: what its kernel
    keeps for backward that is neither an input nor the output, as terms (multiple of its first
    input's bytes, the optional input that must be given for it or None): cross-entropy's
    log-probabilities ((1.0, None),). `fused_saves`: the runtime runs one fused kernel
    keeping what `saves` says, where capture traced a decomposed reference that keeps other tensors
    (attention: q, k, v and the output, not the math path's weights). `output_like_input`: its
    kernel lays the output out in memory as its first input lies, not row-major. `gemm`: PyTorch
    runs it as one BLAS matrix product (mm, bmm, matmul, linear, addmm), whose tensor-core kernels
    slow down when a row of its operands or result is an odd number of 2-byte elements.
    """

    def wrap(f: Callable) -> OpDef:
        doc = inspect.getdoc(f) or ""
        kept = saves or ("nothing" if view is not None else "inputs")
        return OpDef(name or f.__name__, f, frozenset(weights), shape, flops, doc.split("\n")[0],
                     _normalize_example(example), view, kept, follows, float32_math, matrix_engine,
                     tuple((float(m), w) for m, w in keeps_inside),
                     output_like_input, fused_saves, gemm)

    return wrap(fn) if fn is not None else wrap


def _normalize_example(example: Any) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    if example is None:
        return None
    if (isinstance(example, tuple) and len(example) == 2 and isinstance(example[1], Mapping)):
        return tuple(example[0]), dict(example[1])
    return tuple(example), {}


# ---- tracing -----------------------------------------------------------------------------------

def _trace(opdef: OpDef, refs: tuple[TensorRef, ...], attrs: dict[str, Any], result: Any
           ) -> Description:
    lambdas = list(result) if isinstance(result, (tuple, list)) else [result]
    if not lambdas:
        raise TDLError(f"op {opdef.name!r} describes no outputs")
    names = [_output_names(opdef.name, lam) for lam in lambdas]
    if any(n != names[0] for n in names):
        raise TDLError(f"op {opdef.name!r}: outputs index different spaces",
                       expected="every output lambda with the same parameter names", got=str(names))
    variables = tuple(IndexVar(n) for n in names[0])
    if len({v.name for v in variables}) != len(variables):
        raise TDLError(f"op {opdef.name!r}: repeated output index name", got=str(names[0]))
    outputs = tuple(to_value(_call(lam, variables)) for lam in lambdas)
    explicit_shape = _explicit_shape(opdef, refs, attrs, len(variables))
    extents = _infer_extents(opdef.name, variables, outputs, explicit_shape)
    ranges = {uid: (0, n - 1) for uid, n in extents.items()}
    outputs = tuple(_simplify_value(o, ranges) for o in outputs)
    desc = Description(opdef.name, MappingProxyType(dict(attrs)), refs, variables, outputs,
                       MappingProxyType(extents), opdef.flops)
    _check_bounds(desc)
    return desc


def _output_names(op_name: str, lam: Any) -> tuple[str, ...]:
    if isinstance(lam, Compute):
        return tuple(lam.names)
    return lambda_parameter_names(lam, f"op {op_name!r} output")


def _call(lam: Any, variables: tuple[IndexVar, ...]) -> Any:
    return lam.fn(*variables) if isinstance(lam, Compute) else lam(*variables)


def _explicit_shape(opdef: OpDef, refs: tuple[TensorRef, ...], attrs: dict[str, Any], rank: int
                    ) -> tuple[int, ...] | None:
    if opdef.shape is None:
        return None
    shape = tuple(int(s) for s in opdef.shape(*refs, **attrs))
    if len(shape) != rank:
        raise TDLError(f"op {opdef.name!r}: shape= gives rank {len(shape)}",
                       expected=f"rank {rank} (the output lambda's parameters)", got=str(shape))
    return shape


def _infer_extents(op_name: str, out_vars: tuple[IndexVar, ...], outputs: tuple[Value, ...],
                   explicit: tuple[int, ...] | None) -> dict[int, int]:
    extents: dict[int, int] = {}
    every: dict[int, IndexVar] = {v.uid: v for v in out_vars}
    if explicit is not None:
        extents.update((v.uid, n) for v, n in zip(out_vars, explicit))
    for out in outputs:
        for node in walk(out):
            if isinstance(node, Reduce):
                given = dict(node.extents)
                every.update((v.uid, v) for v in node.vars)
                extents.update((v.uid, int(given[v.name])) for v in node.vars if v.name in given)
    _extents_from_opaque_results(outputs, extents)
    unconditional = list(_unconditional_accesses(outputs))
    _extents_from_direct_accesses(op_name, unconditional, extents)
    _extents_from_constraints(unconditional, every, extents)
    missing = [v.name for uid, v in every.items() if uid not in extents]
    if missing:
        raise TDLError(f"op {op_name!r}: cannot infer the extent of indices {missing}",
                       hint="Give the output shape with @op(shape=...) or a reducer extent, "
                            "e.g. Sum(lambda k: ..., k=K)")
    bad = [every[u].name for u, n in extents.items() if n < 1]
    if bad:
        raise TDLError(f"op {op_name!r}: indices {bad} have empty ranges", expected="extent >= 1",
                       got=str({every[u].name: extents[u] for u in extents if every[u].name in bad}),
                       hint="The input shapes are too small for this op's attributes")
    return extents


def _extents_from_opaque_results(outputs: Sequence[Value], extents: dict[int, int]) -> None:
    for out in outputs:
        for node in walk(out):
            if not isinstance(node, OpaqueResult):
                continue
            fn, args = node.call.fn, node.call.args
            slice_shapes = [tuple(a.tensor.shape[d] for d, i in enumerate(a.indices) if i is FULL)
                            for a in args]
            shape = fn.result_shape(*slice_shapes) if fn.result_shape else slice_shapes[0]
            for index, size in zip(node.indices, shape):
                var = index.as_single_var()
                if var is not None:
                    extents.setdefault(var.uid, int(size))


def _unconditional_accesses(outputs: Sequence[Value]) -> Iterator[Access]:
    """Unpadded accesses not under a `where` over indices (those may legally point elsewhere)."""
    stack = list(outputs)
    while stack:
        node = stack.pop()
        if isinstance(node, Access):
            if node.pad is None:
                yield node
        elif isinstance(node, Where) and isinstance(node.cond, IndexCond):
            continue
        elif isinstance(node, OpaqueResult):
            stack.extend(node.call.args)
        elif isinstance(node, Apply):
            stack.extend(node.args)
        elif isinstance(node, Where):
            stack.extend((node.cond, node.then, node.otherwise))
        elif isinstance(node, Reduce):
            stack.append(node.body)


def _extents_from_direct_accesses(op_name: str, accesses: list[Access], extents: dict[int, int]
                                  ) -> None:
    direct: dict[int, tuple[int, str]] = {}
    for acc in accesses:
        for dim, index in enumerate(acc.indices):
            var = index.as_single_var() if index is not FULL else None
            if var is None:
                continue
            size = acc.tensor.shape[dim]
            where = f"{acc.tensor.name} dim {dim}"
            if var.uid in direct and direct[var.uid][0] != size and var.uid not in extents:
                raise TDLError(f"op {op_name!r}: index {var.name!r} addresses dims of different sizes",
                               expected=f"{direct[var.uid][1]} == {where}",
                               got=f"{direct[var.uid][0]} and {size}",
                               hint="The input shapes do not fit together for this op")
            direct.setdefault(var.uid, (size, where))
    for uid, (size, _) in direct.items():
        extents.setdefault(uid, size)


def _extents_from_constraints(accesses: list[Access], every: Mapping[int, IndexVar],
                              extents: dict[int, int]) -> None:
    """x + dx <= size - 1 with dx's extent known gives x's extent (valid, unpadded semantics)."""
    changed = True
    while changed:
        changed = False
        for acc in accesses:
            for dim, index in enumerate(acc.indices):
                if index is FULL:
                    continue
                found = _solve_extent(index, acc.tensor.shape[dim], extents)
                if found is not None and found[0] not in extents:
                    extents[found[0]] = found[1]
                    changed = True


def _solve_extent(index: Affine, size: int, extents: Mapping[int, int]) -> tuple[int, int] | None:
    unknown = [(a, c) for a, c in index.terms if isinstance(a, IndexVar) and a.uid not in extents]
    if len(unknown) != 1 or unknown[0][1] <= 0:
        return None
    var, coef = unknown[0]
    others = Affine(tuple(t for t in index.terms if t[0] is not var), index.const)
    if any(v.uid not in extents for v in others.variables()):
        return None
    _, others_hi = bounds(others, {u: (0, n - 1) for u, n in extents.items()})
    var_max = (size - 1 - others_hi) // coef
    return var.uid, var_max + 1


def _simplify_value(value: Value, ranges: Mapping[int, tuple[int, int]]) -> Value:
    return map_accesses(value, lambda acc: Access(
        acc.tensor, tuple(i if i is FULL else simplify(i, ranges) for i in acc.indices), acc.pad))


def map_accesses(value: Value, f: Callable[[Access], Access]) -> Value:
    """Rebuild `value` with every access replaced by f(access)."""
    if isinstance(value, Access):
        return f(value)
    if isinstance(value, Apply):
        return Apply(value.fn, tuple(map_accesses(a, f) for a in value.args))
    if isinstance(value, Where):
        cond = value.cond if isinstance(value.cond, IndexCond) else map_accesses(value.cond, f)
        return Where(cond, map_accesses(value.then, f), map_accesses(value.otherwise, f))
    if isinstance(value, Reduce):
        return Reduce(value.reducer, value.vars, map_accesses(value.body, f), value.extents)
    if isinstance(value, OpaqueResult):
        call = OpaqueCall(value.call.fn, tuple(f(a) for a in value.call.args))
        return OpaqueResult(call, value.indices)
    return value


def _check_bounds(desc: Description) -> None:
    for out in desc.outputs:
        for acc, ranges, _ in iter_accesses(out, full_ranges(desc)):
            if acc.pad is not None:
                continue
            for dim, index in enumerate(acc.indices):
                if index is FULL:
                    continue
                lo, hi = bounds(index, ranges, INT_DOMAIN)
                size = acc.tensor.shape[dim]
                if lo < 0 or hi > size - 1:
                    raise TDLError(
                        f"op {desc.op_name!r}: access {acc!r} leaves {acc.tensor.name}'s bounds "
                        f"in dim {dim}", expected=f"indices in [0, {size})",
                        got=f"[{lo}, {hi + 1})",
                        hint="Fix the input shapes, or read through .padded(value) if the op pads")


__all__ = ["Description", "OpDef", "TensorRef", "op", "map_accesses", "Const", "IndexValue"]
