"""Reductions over some dims, any rank: the reduced dims are a top-level reducer, so splitting one
leaves the output P(sum), P(max), ... (mean is Sum / N, so P(sum) too).

Output index `d2` walks input dim 2; `r2` reduces over it; with keepdim, `k2` is the kept size-1
dim. `dim=None` (or an empty list) reduces every dim.
"""

from __future__ import annotations

from collections.abc import Callable

from stratagem.tdl.expr import Compute, IndexValue, Max, Min, Prod, Sum, exp, log, sqrt, where
from stratagem.tdl.library.common import POS_INF, axes, axis, names, numel
from stratagem.tdl.trace import op

EXAMPLE = (([4, 5, 6],), {"dim": (1,)})


class Reduction:
    """Output naming and indexing for a reduction of x over `dims`."""

    def __init__(self, name: str, x, dim, keepdim: bool):
        self.x, self.keepdim = x, keepdim
        self.dims = axes(dim, x.ndim, name)
        self.kept = [d for d in range(x.ndim) if d not in self.dims]

    @property
    def out_names(self) -> list[str]:
        return [f"k{d}" if d in self.dims else f"d{d}" for d in range(self.x.ndim)
                if self.keepdim or d not in self.dims]

    @property
    def red_names(self) -> list[str]:
        return names("r", self.dims)

    @property
    def count(self) -> int:
        return numel([self.x.shape[d] for d in self.dims])

    def out_shape(self) -> tuple[int, ...]:
        return tuple(1 if d in self.dims else self.x.shape[d] for d in range(self.x.ndim)
                     if self.keepdim or d not in self.dims)

    def index(self, out_idx, red_idx) -> tuple:
        """The input index for output index `out_idx` and reduced index `red_idx`."""
        kept = iter(i for d, i in zip(self._out_dims(), out_idx) if d not in self.dims)
        red = iter(red_idx)
        return tuple(next(red) if d in self.dims else next(kept) for d in range(self.x.ndim))

    def _out_dims(self) -> list[int]:
        return [d for d in range(self.x.ndim) if self.keepdim or d not in self.dims]

    def over(self, reducer: Callable, out_idx, fn: Callable) -> object:
        """reducer over the reduced dims of fn(x at that point, reduced indices)."""
        return reducer(Compute(self.red_names, lambda *r: fn(self.x[self.index(out_idx, r)], r)))

    def compute(self, body: Callable) -> Compute:
        return Compute(self.out_names, body)


def _reduction_shape(x, *, dim=None, keepdim=False, **_):
    return Reduction("reduction", x, dim, keepdim).out_shape()


def _reduce_op(name: str, reducer: Callable, doc: str, post: Callable | None = None, saves: str = "inputs"):
    def describe(x, *, dim=None, keepdim=False):
        red = Reduction(name, x, dim, keepdim)

        def body(*idx):
            value = red.over(reducer, idx, lambda v, r: v)
            return post(value, red) if post else value

        return red.compute(body)

    describe.__doc__ = doc
    return op(name=name, shape=_reduction_shape, example=EXAMPLE, saves=saves)(describe)


sum_ = _reduce_op("sum", Sum, "Sum over dims", saves="nothing")
mean = _reduce_op("mean", Sum, "Sum over dims / their element count", lambda v, red: v / float(red.count),
                  saves="nothing")
amax = _reduce_op("amax", Max, "Max over dims", saves="inputs_and_output")
amin = _reduce_op("amin", Min, "Min over dims", saves="inputs_and_output")
prod = _reduce_op("prod", Prod, "Product over dims", saves="inputs_and_output")


def _any_all(name: str, reducer: Callable, doc: str):
    def describe(x, *, dim=None, keepdim=False):
        red = Reduction(name, x, dim, keepdim)
        return red.compute(lambda *idx: red.over(reducer, idx, lambda v, r: v != 0.0))

    describe.__doc__ = doc
    return op(name=name, shape=_reduction_shape, example=EXAMPLE)(describe)


any_ = _any_all("any", Max, "1 where any element over dims is nonzero")
all_ = _any_all("all", Min, "1 where every element over dims is nonzero")


def _variance(red: Reduction, idx, correction) -> object:
    mean_value = red.over(Sum, idx, lambda v, r: v) / float(red.count)
    return red.over(Sum, idx, lambda v, r: (v - mean_value) * (v - mean_value)) / float(
        red.count - correction)


@op(shape=_reduction_shape, example=EXAMPLE)
def var(x, *, dim=None, correction=1, keepdim=False):
    """Sum((x - mean)^2) / (N - correction) over dims."""
    red = Reduction("var", x, dim, keepdim)
    return red.compute(lambda *idx: _variance(red, idx, correction))


@op(saves="inputs_and_output", shape=_reduction_shape, example=EXAMPLE)
def std(x, *, dim=None, correction=1, keepdim=False):
    """sqrt of var."""
    red = Reduction("std", x, dim, keepdim)
    return red.compute(lambda *idx: sqrt(_variance(red, idx, correction)))


@op(saves="inputs_and_output", shape=_reduction_shape, example=EXAMPLE)
def logsumexp(x, *, dim, keepdim=False):
    """log(Sum(exp(x))) over dims, computed stably as m + log(Sum(exp(x - m))), m the max."""
    red = Reduction("logsumexp", x, dim, keepdim)

    def body(*idx):
        m = red.over(Max, idx, lambda v, r: v)
        return m + log(red.over(Sum, idx, lambda v, r: exp(v - m)))

    return red.compute(body)


def _flat_position(red: Reduction, r) -> IndexValue:
    """Row-major position of the reduced index r among the reduced dims (argmax over several)."""
    sizes = [red.x.shape[d] for d in red.dims]
    position = 0
    for i, index in enumerate(r):
        position = position + index * numel(sizes[i + 1:])
    return IndexValue(position) if not isinstance(position, int) else position


def _first_extreme(red: Reduction, idx, extreme: Callable) -> tuple:
    """(the extreme value, the first position holding it)."""
    m = red.over(extreme, idx, lambda v, r: v)
    first = red.over(Min, idx, lambda v, r: where(v == m, _flat_position(red, r), POS_INF))
    return m, first


def _arg_op(name: str, extreme: Callable, doc: str):
    def describe(x, *, dim=None, keepdim=False):
        red = Reduction(name, x, dim, keepdim)
        return red.compute(lambda *idx: _first_extreme(red, idx, extreme)[1])

    describe.__doc__ = doc
    return op(name=name, shape=_reduction_shape, example=EXAMPLE)(describe)


argmax = _arg_op("argmax", Max, "first position of the max over dims (row-major over several)")
argmin = _arg_op("argmin", Min, "first position of the min over dims (row-major over several)")


def _dim_op(name: str, extreme: Callable, doc: str):
    def describe(x, *, dim, keepdim=False):
        red = Reduction(name, x, axis(dim, x.ndim, name), keepdim)
        values = red.compute(lambda *idx: _first_extreme(red, idx, extreme)[0])
        positions = red.compute(lambda *idx: _first_extreme(red, idx, extreme)[1])
        return values, positions

    describe.__doc__ = doc
    return op(name=name, shape=_reduction_shape, example=(([4, 5, 6],), {"dim": 1}), saves="output")(describe)


max_dim = _dim_op("max_dim", Max, "(values, indices) of the max along one dim (aten max.dim)")
min_dim = _dim_op("min_dim", Min, "(values, indices) of the min along one dim (aten min.dim)")


@op(saves="nothing", shape=lambda x, *, dim: x.shape, example=(([4, 6],), {"dim": 1}))
def cumsum(x, *, dim):
    """out[.., i, ..] = Sum(t <= i: x[.., t, ..])"""
    a = axis(dim, x.ndim, "cumsum")

    def body(*idx):
        def term(t):
            return where(t - idx[a] <= 0, x[tuple(t if d == a else i for d, i in enumerate(idx))], 0.0)
        return Sum(lambda t: term(t), t=x.shape[a])

    return Compute(names("d", range(x.ndim)), body)
