"""Partition analysis of one operator (Tofu §4.2 and Appendix A.2; FlexFlow Table 2).

Tofu's partition-n-reduce: k workers each run the operator on part of the inputs, and the output
is either the concatenation of their outputs (case 1: split an output index) or their elementwise
reduction (case 2: split an index of the top-level reducer). For a split of index v into k parts,
worker w's range of v is [w X_v / k, (w+1) X_v / k), every other index keeps its full range, and
the input region worker w reads is the interval image of those ranges through each access
(`regions.iter_accesses` + `regions.access_box`): `Analysis.share`. Where the chunks are even,
every index of v stays inside its tensor and moves by a constant when v moves P chunks (P = 1 for
affine indices; P chunks pass every floor division and remainder of v whole, as a reshape's
`L // T`, `L % T` have), and no index condition mentions v, worker w + P's regions are worker w's
moved by that constant in each dim: the first P workers (after a reduction split's first, which
adds the extra term) are analyzed and the others moved (`Analysis._worker_shares`), so a split
over 16,384 devices costs what one over P does.

Case 2 applies when the output is linear in one top-level reducer R: out = A * R + C for Sum (each
worker computes A * R_w; the first worker adds C), out = R + C for Max and Min (each adds C),
out = R for Prod (`_top_level_reduction`), where A and C do not use R (nor a copy of it: layer
norm's (x - mean) * rsqrt(var) is not linear in mean's Sum). Splitting an index of R leaves the
output `P(reducer)`.

A split is offered only if each worker's input region is exactly what it reads (no over-fetch):
`Analysis.can_split` checks `regions.is_exact_access` and that unions of accesses fill their box.
Only dims whose index variables the split narrows are checked: elsewhere a worker reads what the
whole op reads (a stride-2 1x1 convolution skips columns whether split or not).
Each input then gets, per split, the placement it needs: `R` when all workers read the same region,
`S(d)` when workers read the even k-way chunks of dim d, and `None` otherwise (halos, strides,
uneven chunks: valid partition-n-reduce, not expressible as a DTensor placement).

Dim kinds (DESIGN.md): reduction indices are `reduction`; an output index addressing the sample
(batch) dim of a non-weight input is `sample`; one whose split splits a weight is `parameter`; any
other output index is `attribute`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from stratagem.errors import TDLError
from stratagem.tdl.expr import FULL, Access, Apply, Const, OpaqueResult, Reduce, Value, Where, children, walk
from stratagem.tdl.flops import FlopPolynomial, flop_polynomial
from stratagem.tdl.indexing import INT_DOMAIN, Affine, FloorDiv, IndexCond, IndexVar, Mod, bounds
from stratagem.tdl.regions import (
    Box, access_box, boxes_cover_union, full_ranges, is_exact_access, iter_accesses, union_box,
)
from stratagem.tdl.symbolic import SYM_DOMAIN, SymForm, SymInterval
from stratagem.tdl.trace import Description

KINDS = ("sample", "attribute", "parameter", "reduction")


@dataclass(frozen=True)
class Dim:
    """One splittable-or-not index of the operator's iteration space."""

    name: str
    size: int
    kind: str                      # sample | attribute | parameter | reduction
    reducer: str | None = None     # for reduction dims: sum | max | min | prod
    splittable: bool = True
    why_not: str = ""

    @property
    def is_reduction(self) -> bool:
        return self.kind == "reduction"

    def __str__(self) -> str:
        text = f"{self.name}:{self.kind}"
        if self.reducer:
            text += f"->P({self.reducer})"
        return text if self.splittable else f"{text}(no split: {self.why_not})"


@dataclass(frozen=True)
class WorkerShare:
    """What one worker computes and reads."""

    output_box: Box                        # region of every output (all outputs share it)
    input_boxes: tuple[Box | None, ...]    # per input: region read, None if nothing
    partial: bool                          # True when the output is a partial reduction


@dataclass(frozen=True)
class Split:
    """A k-way split of one dim: each worker's share, and how outputs combine."""

    dim: str
    parts: int
    workers: tuple[WorkerShare, ...]
    combine: str                            # "concat" or the reducer ("sum", "max", ...)
    placements: tuple[str | None, ...]      # per input: "R", "S(d)", or None (irregular)
    output_placement: str                   # "S(d)" or "P(sum)", ...

    @property
    def is_regular(self) -> bool:
        return all(p is not None for p in self.placements)


@dataclass(frozen=True)
class TopReduction:
    reduce: Reduce
    scale: Value | None      # A in out = A * R + C (None means 1)
    extra: Value | None      # C


class Analysis:
    """The partition analysis of a traced operator. Build with `analyze(...)`."""

    def __init__(self, desc: Description, sample_dims: Sequence[int | None] | None = None):
        self.desc = desc
        self.sample_dims = _default_sample_dims(desc) if sample_dims is None else tuple(sample_dims)
        self.top = _top_level_reduction(desc)
        self._vars = {v.name: v for v in desc.output_vars}
        if self.top is not None:
            clash = [v.name for v in self.top.reduce.vars if v.name in self._vars]
            if clash:
                raise TDLError(f"op {desc.op_name!r}: reduction index names {clash} repeat output "
                               "index names", hint="Rename the reducer lambda's parameters")
            self._vars.update((v.name, v) for v in self.top.reduce.vars)
        self._split_cache: dict[tuple[str, int], Split | None] = {}
        self.dims = tuple(self._make_dim(name) for name in self._vars)

    # ---- basic facts --------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.desc.op_name

    @property
    def output_shape(self) -> tuple[int, ...]:
        return self.desc.output_shape

    @property
    def input_shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(r.shape for r in self.desc.inputs)

    @property
    def output_dims(self) -> tuple[Dim, ...]:
        return self.dims[: len(self.desc.output_vars)]

    def dim(self, name: str) -> Dim:
        for d in self.dims:
            if d.name == name:
                return d
        raise TDLError(f"op {self.name!r} has no dim {name!r}",
                       expected=f"one of {[d.name for d in self.dims]}", got=repr(name))

    def index_var(self, name: str) -> IndexVar:
        """The index variable of dim `name` (output or top-level reduction index)."""
        self.dim(name)
        return self._vars[name]

    @property
    def symbols(self) -> dict[str, str]:
        """The symbol standing for each dim's extent in `symbolic_regions` (b -> B)."""
        return _symbol_names(self._vars)

    def output_dim_index(self, name: str) -> int | None:
        names = [v.name for v in self.desc.output_vars]
        return names.index(name) if name in names else None

    @cached_property
    def is_elementwise(self) -> bool:
        """Every input is read at exactly the output index (after broadcasting), no reductions."""
        if any(isinstance(n, (Reduce, OpaqueResult)) for o in self.desc.outputs for n in walk(o)):
            return False
        out = [v.uid for v in self.desc.output_vars]
        for o in self.desc.outputs:
            for acc, _, _ in iter_accesses(o, full_ranges(self.desc)):
                trailing = out[len(out) - acc.tensor.ndim:]
                for dim, index in enumerate(acc.indices):
                    var = index.as_single_var() if index is not FULL else None
                    size_one = acc.tensor.shape[dim] == 1 and not index.variables()
                    if not size_one and (var is None or var.uid != trailing[dim]):
                        return False
        return True

    def signature(self) -> str:
        args = ", ".join(f"{r.name}[{','.join(map(str, r.shape))}]" for r in self.desc.inputs)
        out = ",".join(str(s) for s in self.output_shape)
        return f"{self.name}({args}) -> [{out}]   " + "  ".join(map(str, self.dims))

    # ---- worker shares --------------------------------------------------------------------------
    def ranges_for(self, assignment: Mapping[str, tuple[int, int]]) -> dict[int, tuple[int, int]]:
        """Index ranges (inclusive) for half-open per-dim assignments; other indices full."""
        ranges = full_ranges(self.desc)
        for name, (start, stop) in assignment.items():
            ranges[self._vars[name].uid] = (start, stop - 1)
        return ranges

    def share(self, assignment: Mapping[str, tuple[int, int]], first_in_reduction: bool = True
              ) -> WorkerShare:
        """Regions for a worker computing dims[name] in [start, stop) for each assigned dim."""
        ranges = self.ranges_for(assignment)
        reduction_split = self._splits_reduction(assignment)
        found: list[list[Box]] = [[] for _ in self.desc.inputs]
        for out in self._worker_outputs(reduction_split, first_in_reduction):
            for acc, rng, _ in iter_accesses(out, ranges):
                box = access_box(acc, rng)
                if box is not None:
                    found[acc.tensor.position].append(box)
        output_box = tuple((ranges[v.uid][0], ranges[v.uid][1] + 1) for v in self.desc.output_vars)
        return WorkerShare(output_box, tuple(union_box(b) for b in found), reduction_split)

    def _splits_reduction(self, assignment: Mapping[str, tuple[int, int]]) -> bool:
        if self.top is None:
            return False
        names = {v.name for v in self.top.reduce.vars}
        return any(n in names and (lo, hi) != (0, self.dim(n).size) for n, (lo, hi) in assignment.items())

    def _worker_outputs(self, reduction_split: bool, first: bool) -> tuple[Value, ...]:
        if not reduction_split or self.top is None:
            return self.desc.outputs
        return (partial_output(self.top, include_extra=first),)

    def chunk(self, dim: str, parts: int, worker: int) -> tuple[int, int]:
        size = self.dim(dim).size
        return worker * size // parts, (worker + 1) * size // parts

    # ---- splits -------------------------------------------------------------------------------
    def split(self, dim: str, parts: int) -> Split:
        """The k-way split of `dim`; raises if it is not a valid partition-n-reduce split."""
        found = self._split(dim, parts)
        if found is None:
            d = self.dim(dim)
            reason = d.why_not or "some worker would be given input it does not read"
            raise TDLError(f"op {self.name!r} cannot split dim {dim!r} {parts} ways",
                           got=f"size {d.size}", hint=reason)
        return found

    def can_split(self, dim: str, parts: int) -> bool:
        return self._split(dim, parts) is not None

    def _split(self, dim: str, parts: int) -> Split | None:
        key = (dim, parts)
        if key not in self._split_cache:
            self._split_cache[key] = self._compute_split(dim, parts)
        return self._split_cache[key]

    def _compute_split(self, dim: str, parts: int) -> Split | None:
        d = self.dim(dim)
        if parts < 1 or parts > d.size or (parts > 1 and not d.splittable):
            return None
        workers = self._worker_shares(dim, parts)
        if workers is None:
            return None
        out_index = self.output_dim_index(dim)
        combine = "concat" if out_index is not None else d.reducer
        out_placement = f"S({out_index})" if out_index is not None else f"P({d.reducer})"
        placements = tuple(self._input_placement(i, workers, parts, partial=out_index is None)
                           for i in range(len(self.desc.inputs)))
        if parts == 1:
            placements = tuple("R" for _ in placements)
            out_placement = "R"
        return Split(dim, parts, tuple(workers), combine, placements, out_placement)

    def _worker_shares(self, dim: str, parts: int, moved: bool = True) -> list[WorkerShare] | None:
        """Each worker's share of the k-way split of `dim`; None if some worker's is not exact.
        Where the regions of worker w + P are worker w's moved by a fixed step (`_period`: even
        chunks, indices that move by a constant when `dim` moves P chunks and stay inside their
        tensors, no index condition on it), the first P workers are analyzed (after the first one
        of a reduction split, which adds the extra term) and the others are moved copies: the
        same shares, and the same exactness, as analyzing each one (`moved=False`; tested equal)."""
        first = 1 if parts > 1 and self._splits_reduction({dim: self.chunk(dim, parts, 1)}) else 0
        period = self._period(dim, parts, first == 1) if moved and parts > first + 1 else None
        analyzed = parts if period is None else min(parts, first + period[0])
        workers = []
        for w in range(analyzed):
            assignment = {dim: self.chunk(dim, parts, w)}
            if not self._is_exact(assignment, first_in_reduction=(w == 0)):
                return None
            workers.append(self.share(assignment, first_in_reduction=(w == 0)))
        if period is not None:
            count, output_step, input_steps = period
            workers += [_moved(workers[first + (w - first) % count], (w - first) // count, output_step, input_steps)
                        for w in range(analyzed, parts)]
        return workers

    def _period(self, dim: str, parts: int, reduction: bool
                ) -> tuple[int, tuple[int, ...], tuple[tuple[int, ...], ...]] | None:
        """(P, how far the output box and each input's box move from worker w to worker w + P)
        where they move rigidly (see `_worker_shares`): P chunks make every floor division and
        remainder of `dim` in an index move by a whole number (1 without them); None otherwise.
        An input dim that some access reads whole, whatever the worker (a norm's or a mean loss's
        reduction over the split dim), stays whole in every worker's box: it does not move, and
        the accesses that do move there (all by the same step) move inside it."""
        size = self.dim(dim).size
        if size % parts:
            return None
        chunk, var = size // parts, self._vars[dim]
        ranges = full_ranges(self.desc)
        indices: list[tuple[int, int, Any]] = []            # (input, dim, index mentioning var)
        whole: set[tuple[int, int]] = set()                 # (input, dim) read whole by some access
        divisors: list[int] = []
        for out in self._worker_outputs(reduction, first=False):
            if any(isinstance(n, Where) and isinstance(n.cond, IndexCond) and _mentions(n.cond.expr, var)
                   for n in walk(out)):
                return None
            for acc, rng, _ in iter_accesses(out, ranges):
                for d, index in enumerate(acc.indices):
                    if index is not FULL and _mentions(index, var):
                        if not _inside(index, rng, acc.tensor.shape[d]):
                            return None
                        divisors += _divisors(index, var)
                        indices.append((acc.tensor.position, d, index))
                    else:
                        indices.append((acc.tensor.position, d, None))
                        if index is FULL or bounds(index, rng, INT_DOMAIN) == (0, acc.tensor.shape[d] - 1):
                            whole.add((acc.tensor.position, d))
        common = math.lcm(*divisors) if divisors else 1
        count = common // math.gcd(common, chunk)
        steps: list[dict[int, int]] = [{} for _ in self.desc.inputs]        # per input: dim -> step
        for position, d, index in indices:
            moved = 0 if index is None else _shift(index, var, count * chunk)
            if index is None and (position, d) in whole:
                continue
            if moved is None or steps[position].setdefault(d, moved) != moved:
                return None
        inputs = tuple(tuple(0 if (position, d) in whole else found.get(d, 0) for d in range(len(ref.shape)))
                       for position, (found, ref) in enumerate(zip(steps, self.desc.inputs)))
        out_index = self.output_dim_index(dim)
        output = tuple(count * chunk if k == out_index else 0 for k in range(len(self.desc.output_vars)))
        return count, output, inputs

    def _is_exact(self, assignment: Mapping[str, tuple[int, int]], first_in_reduction: bool) -> bool:
        ranges = self.ranges_for(assignment)
        unsplit = full_ranges(self.desc)
        reduction_split = self._splits_reduction(assignment)
        per_input: list[list[Box]] = [[] for _ in self.desc.inputs]
        for out in self._worker_outputs(reduction_split, first_in_reduction):
            for acc, rng, _ in iter_accesses(out, ranges):
                box = access_box(acc, rng)
                if box is None:
                    continue
                if not is_exact_access(acc, rng, unsplit):
                    return False
                per_input[acc.tensor.position].append(box)
        return all(boxes_cover_union(b) for b in per_input if b)

    def _input_placement(self, i: int, workers: list[WorkerShare], parts: int, partial: bool
                         ) -> str | None:
        boxes = [w.input_boxes[i] for w in workers]
        readers = [b for b in boxes if b is not None]
        if len(readers) != len(boxes) and not partial:
            return None if readers else "R"
        if not readers or all(b == readers[0] for b in readers):
            return "R"      # under a reduction split, terms added by the first worker only read it
        varying = [d for d in range(len(readers[0])) if len({b[d] for b in readers}) > 1]
        if len(varying) != 1:
            return None
        d = varying[0]
        size = self.desc.inputs[i].shape[d]
        even = [(w * size // parts, (w + 1) * size // parts) for w in range(parts)]
        return f"S({d})" if [b[d] for b in readers] == even else None

    # ---- dims and kinds -----------------------------------------------------------------------
    def _make_dim(self, name: str) -> Dim:
        var = self._vars[name]
        size = self.desc.extents[var.uid]
        reduction = self.top is not None and any(v is var for v in self.top.reduce.vars)
        if reduction:
            kind, reducer = "reduction", self.top.reduce.reducer
        else:
            kind, reducer = self._output_kind(var), None
        why = _why_unsplittable(self.desc, var, size)
        return Dim(name, size, kind, reducer, not why, why)

    def _output_kind(self, var: IndexVar) -> str:
        if self._addresses_sample_dim(var):
            return "sample"
        if self._splits_a_weight(var):
            return "parameter"
        return "attribute"

    def _addresses_sample_dim(self, var: IndexVar) -> bool:
        for out in self.desc.outputs:
            for acc, _, _ in iter_accesses(out, full_ranges(self.desc)):
                ref = acc.tensor
                sd = self.sample_dims[ref.position]
                if ref.is_weight or sd is None or acc.indices[sd] is FULL:
                    continue
                if any(v.uid == var.uid for v in acc.indices[sd].variables()):
                    return True
        return False

    def _splits_a_weight(self, var: IndexVar) -> bool:
        for out in self.desc.outputs:
            for acc, _, _ in iter_accesses(out, full_ranges(self.desc)):
                if acc.tensor.is_weight and any(
                        index is not FULL and any(v.uid == var.uid for v in index.variables())
                        for index in acc.indices):
                    return True
        return False

    def direct_input_dims(self, dim: str) -> tuple[tuple[int, int], ...]:
        """(input position, tensor dim) pairs that `dim`'s index addresses as itself, e.g. x[b, k]."""
        uid = self._vars[dim].uid
        found: dict[tuple[int, int], None] = {}
        for out in self.desc.outputs:
            for acc, _, _ in iter_accesses(out, full_ranges(self.desc)):
                for d, index in enumerate(acc.indices):
                    var = index.as_single_var() if index is not FULL else None
                    if var is not None and var.uid == uid:
                        found[(acc.tensor.position, d)] = None
        return tuple(found)

    def addresses_sample_dim(self, dim: str) -> bool:
        """Whether `dim` (an output or reduction index) reads the batch dim of a non-weight input."""
        return self._addresses_sample_dim(self._vars[dim])

    def kinds(self) -> dict[str, str]:
        return {d.name: d.kind for d in self.dims}

    # ---- symbolic description (Tofu's representation) -----------------------------------------
    def symbolic_regions(self, dim: str, parts: int, worker: int) -> tuple[tuple[SymInterval, ...] | None, ...]:
        """Per input, per dim: the interval worker `worker` of `parts` reads, over extent symbols."""
        names = _symbol_names(self._vars)
        ranges: dict[int, tuple[SymForm, SymForm]] = {}
        for uid, n in self.desc.extents.items():
            ranges[uid] = (SymForm.constant(0), SymForm.constant(n - 1))
        for vname, var in self._vars.items():
            sym = SymForm.symbol(names[vname])
            lo, hi = SymForm.constant(0), sym - 1
            if vname == dim:
                lo, hi = sym * worker / parts, sym * (worker + 1) / parts - 1
            ranges[var.uid] = (lo, hi)
        found: list[list[tuple[SymInterval, ...]]] = [[] for _ in self.desc.inputs]
        int_ranges = self.ranges_for({dim: self.chunk(dim, parts, worker)})
        partial = self._splits_reduction({dim: self.chunk(dim, parts, worker)})
        for out in self._worker_outputs(partial, worker == 0):
            for acc, rng, _ in iter_accesses(out, int_ranges):
                sym_ranges = {u: ranges[u] for u in rng}
                found[acc.tensor.position].append(tuple(
                    SymInterval(SymForm.constant(0), SymForm.constant(acc.tensor.shape[d] - 1))
                    if index is FULL else SymInterval(*bounds(index, sym_ranges, SYM_DOMAIN))
                    for d, index in enumerate(acc.indices)))
        return tuple(f[0] if f else None for f in found)

    # ---- cost facts ---------------------------------------------------------------------------
    @cached_property
    def contraction_operands(self) -> frozenset[int]:
        """Input positions read as factors of a product of two inputs under a summing reduction
        (x and W of `sum_k x[i, k] * W[j, k] + b[j]`, not b): the inputs whose gradient is itself a
        contraction. A term outside the product (a bias, an LSTM cell's c) gets its gradient by an
        elementwise pass or a sum over dY."""
        operands: set[int] = set()
        for out in self.desc.outputs:
            for node in walk(out):
                if isinstance(node, Reduce) and node.reducer == "sum":
                    operands.update(_product_factors(node.body))
        return frozenset(operands)

    @cached_property
    def flop_polynomial(self) -> FlopPolynomial:
        return flop_polynomial(self.desc)

    def flops(self, local: Mapping[str, int] | None = None) -> float:
        """FLOPs of one worker whose dims have the given local extents (others full)."""
        local = dict(local or {})
        if self.desc.flops_override is not None:
            dims = {d.name: local.get(d.name, d.size) for d in self.dims}
            return float(self.desc.flops_override(dims, self.input_shapes, **self.desc.attrs))
        return self.flop_polynomial.evaluate(self._local_extents(local))

    @cached_property
    def draw_polynomial(self) -> FlopPolynomial:
        return flop_polynomial(self.desc, only="uniform")

    def random_draws(self, local: Mapping[str, int] | None = None) -> float:
        """Counter-based random numbers (tdl.rng) one worker draws under the given local extents:
        dropout's one per element, attention's one per weight of [B, H, L, S]."""
        if not self.draw_polynomial.terms:
            return 0.0
        return self.draw_polynomial.evaluate(self._local_extents(dict(local or {})))

    def _local_extents(self, local: Mapping[str, int]) -> dict[int, int]:
        extents = dict(self.desc.extents)
        for name, n in local.items():
            extents[self._vars[name].uid] = n
        return extents


def analyze_description(desc: Description, sample_dims: Sequence[int | None] | None = None) -> Analysis:
    return Analysis(desc, sample_dims)


def _default_sample_dims(desc: Description) -> tuple[int | None, ...]:
    """Convention without graph context: the first input's dim 0 is the batch, unless it is a weight."""
    first = desc.inputs[0] if desc.inputs else None
    return tuple(0 if (ref is first and not ref.is_weight and ref.ndim > 0) else None
                 for ref in desc.inputs)


def _why_unsplittable(desc: Description, var: IndexVar, size: int) -> str:
    if size < 2:
        return "size 1"
    for out in desc.outputs:
        for node in walk(out):
            if isinstance(node, OpaqueResult) and any(
                    any(v.uid == var.uid for v in i.variables()) for i in node.indices):
                return f"indexes the result of opaque {node.call.fn.name!r}"
    return ""


def _symbol_names(variables: Mapping[str, IndexVar]) -> dict[str, str]:
    names: dict[str, str] = {}
    for name in variables:
        sym = name.upper()
        while sym in names.values() or (sym in variables and sym != name):
            sym += "'"
        names[name] = sym
    return names


# ---- contractions' factors (cost facts) ---------------------------------------------------------

def _product_factors(value: Value) -> set[int]:
    """Positions of the inputs that are factors of a product with another input in `value`: a
    mul's factors read directly (not through a nested reduction, which is its own contraction),
    when its factors read two inputs or more (attention's v times softmax(q . k))."""
    found: set[int] = set()
    for node in walk(value):
        if isinstance(node, Apply) and node.fn == "mul":
            every = {n.tensor.position for arg in node.args for n in walk(arg) if isinstance(n, Access)}
            if len(every) >= 2:
                found.update(_direct_reads(node))
    return found


def _direct_reads(value: Value) -> set[int]:
    """Input positions read in `value` outside any reduction inside it."""
    reads, stack = set(), [value]
    while stack:
        node = stack.pop()
        if isinstance(node, Access):
            reads.add(node.tensor.position)
        elif not isinstance(node, Reduce):
            stack.extend(children(node))
    return reads


# ---- top-level reduction (case 2) ---------------------------------------------------------------

def _top_level_reduction(desc: Description) -> TopReduction | None:
    if len(desc.outputs) != 1:
        return None
    return _linear_in_reduce(desc.outputs[0])


def _linear_in_reduce(value: Value) -> TopReduction | None:
    """Write value as A * R + C for a top-level reducer R (see module docstring)."""
    if isinstance(value, Reduce):
        return TopReduction(value, None, None)
    if not isinstance(value, Apply):
        return None
    fn, args = value.fn, value.args
    if fn in ("add", "sub"):
        for side in (0, 1):
            inner = _linear_in_reduce(args[side])
            other = args[1 - side]
            if inner is None or _contains_reduce(other, inner.reduce):
                continue
            if fn == "sub" and side == 1:
                if inner.reduce.reducer != "sum":
                    return None
                scale = Const(-1.0) if inner.scale is None else Apply("neg", (inner.scale,))
                extra = other if inner.extra is None else Apply("sub", (other, inner.extra))
                return _checked(TopReduction(inner.reduce, scale, extra))
            signed = other if fn == "add" else Apply("neg", (other,))
            extra = signed if inner.extra is None else Apply("add", (inner.extra, signed))
            return _checked(TopReduction(inner.reduce, inner.scale, extra))
        return None
    if fn in ("mul", "div") or fn == "neg":
        if fn == "neg":
            inner, factor = _linear_in_reduce(args[0]), Const(-1.0)
        elif fn == "div":
            inner, factor = _linear_in_reduce(args[0]), Apply("div", (Const(1.0), args[1]))
            if inner is not None and _contains_reduce(args[1], inner.reduce):
                return None
        else:
            inner, factor = _linear_in_reduce(args[0]), args[1]
            if inner is None or _contains_reduce(args[1], inner.reduce):
                inner, factor = _linear_in_reduce(args[1]), args[0]
                if inner is not None and _contains_reduce(args[0], inner.reduce):
                    return None
        if inner is None or inner.reduce.reducer != "sum":
            return None
        scale = factor if inner.scale is None else Apply("mul", (inner.scale, factor))
        extra = None if inner.extra is None else Apply("mul", (inner.extra, factor))
        return TopReduction(inner.reduce, scale, extra)
    return None


def _checked(top: TopReduction) -> TopReduction | None:
    if top.reduce.reducer == "prod" and (top.extra is not None or top.scale is not None):
        return None
    if top.reduce.reducer in ("max", "min") and top.scale is not None:
        return None
    return top


def _contains_reduce(value: Value, reduce: Reduce) -> bool:
    """Whether value uses R: the node itself, or a copy (tracing rebuilds shared subexpressions,
    so layer norm's mean appears once in x - mean and again inside the variance)."""
    text = None
    for node in walk(value):
        if node is reduce:
            return True
        if isinstance(node, Reduce):
            text = repr(reduce) if text is None else text
            if repr(node) == text:
                return True
    return False


def partial_output(top: TopReduction, include_extra: bool) -> Value:
    """What one worker computes when the top-level reducer's indices are split."""
    out: Value = top.reduce
    if top.scale is not None:
        out = Apply("mul", (out, top.scale))
    if top.extra is not None and (include_extra or top.reduce.reducer in ("max", "min")):
        out = Apply("add", (out, top.extra))
    return out


def _shift(expr: Any, var: IndexVar, distance: int) -> int | None:
    """How far `expr` moves when `var` moves by `distance`, the same for every value of `var`;
    None where that is not so (a division or remainder that `distance` does not pass whole)."""
    if isinstance(expr, IndexVar):
        return distance if expr.uid == var.uid else 0
    if isinstance(expr, Affine):
        moves = [_shift(atom, var, distance) for atom, _ in expr.terms]
        return None if None in moves else sum(c * m for (_, c), m in zip(expr.terms, moves))
    if isinstance(expr, (FloorDiv, Mod)):
        inner = _shift(expr.inner, var, distance)
        if inner is None or inner % expr.divisor:
            return None
        return inner // expr.divisor if isinstance(expr, FloorDiv) else 0
    return None if _mentions(expr, var) else 0


def _divisors(expr: Any, var: IndexVar) -> list[int]:
    """The divisors of the floor divisions and remainders of `var` inside `expr`."""
    if isinstance(expr, Affine):
        return [d for atom, _ in expr.terms for d in _divisors(atom, var)]
    if isinstance(expr, (FloorDiv, Mod)) and _mentions(expr, var):
        return [expr.divisor, *_divisors(expr.inner, var)]
    return []


def _mentions(expr: Any, var: IndexVar) -> bool:
    try:
        return any(v.uid == var.uid for v in expr.variables())
    except TDLError:                 # not affine (a product of indices): assume it does
        return True


def _inside(index: Any, ranges: Mapping[int, tuple[int, int]], size: int) -> bool:
    """Whether the index stays in [0, size) over `ranges` (no worker's box is clipped)."""
    lo, hi = bounds(index, ranges, INT_DOMAIN)
    return lo >= 0 and hi < size


def _moved(share: WorkerShare, times: int, output_step: tuple[int, ...],
           input_steps: tuple[tuple[int, ...], ...]) -> WorkerShare:
    """`share` with its boxes moved `times` steps."""
    def move(box: Box, step: tuple[int, ...]) -> Box:
        return tuple((start + times * s, stop + times * s) for (start, stop), s in zip(box, step))
    return WorkerShare(move(share.output_box, output_step),
                       tuple(None if box is None else move(box, step) for box, step in zip(share.input_boxes, input_steps)),
                       share.partial)
