"""Losses over x [N, C, *d] with class-index targets [N, *d], and mean squared error.

    per-position loss  l[n] = (1 - eps) * valid[n] * w[t[n]] * (lse[n] - x[n, t[n]])
                              + eps / C * valid[n] * Sum(c: w[c] * (lse[n] - x[n, c]))
    mean               Sum(n: l[n] / W),  W = Sum(n': valid[n'] * w[t[n']])
    sum, none          Sum(n: l[n]),  l

with lse[n] the log-sum-exp over classes, valid[n] = (t[n] != ignore_index), w = 1 without a
class weight, and x[n, t[n]] the one-hot Sum(c: where(t[n] == c, x[n, c], 0)). The mean is one
top-level Sum over positions whose terms divide by the nested total W: splitting the batch leaves
P(sum), each worker reading all targets to count W (ignored targets make W data-dependent). The
smoothing term of the mean divides by W too, as torch 2.13 does.
"""

from __future__ import annotations

from stratagem.errors import TDLError
from stratagem.tdl.expr import Compute, Max, Sum, exp, log, where
from stratagem.tdl.library.common import broadcast_shape, names, numel, pointwise
from stratagem.tdl.trace import op

REDUCTIONS = ("none", "mean", "sum")


class Positions:
    """Positions (n, *d) of x [N, C, *d] and their names; targets are read at them."""

    def __init__(self, name: str, x, target, reduction: str):
        if reduction not in REDUCTIONS:
            raise TDLError(f"op {name!r}: unknown reduction", expected=str(REDUCTIONS), got=repr(reduction))
        if x.ndim < 2 or tuple(target.shape) != (x.shape[0], *x.shape[2:]):
            raise TDLError(f"op {name!r} needs x [N, C, *d] and class indices [N, *d]",
                           got=f"x {list(x.shape)}, target {list(target.shape)}")
        self.x, self.target, self.classes = x, target, x.shape[1]
        self.names = ["n", *names("d", range(2, x.ndim))]

    def at(self, pos, c):
        return self.x[(pos[0], c, *pos[1:])]

    def class_weight(self, weight, pos):
        """w[t[pos]] (0 when the target matches no class, as ignore_index does not)."""
        if weight is None:
            return 1.0
        return Sum(lambda c: where(self.target[tuple(pos)] == c, weight[c], 0.0))

    def valid(self, pos, ignore_index):
        return self.target[tuple(pos)] != float(ignore_index)

    def over(self, fn):
        return Sum(Compute(self.names, lambda *pos: fn(pos)))


def _lse(positions: Positions, pos):
    m = Max(lambda c: positions.at(pos, c))
    return m + log(Sum(lambda c: exp(positions.at(pos, c) - m)))


def _nll(positions: Positions, weight, pos, logp, ignore_index):
    """-w[t] * logp[t] as a one-hot sum over classes, times 0 for an ignored target."""
    w = (lambda c: 1.0) if weight is None else (lambda c: weight[c])
    picked = Sum(lambda c: where(positions.target[tuple(pos)] == c, -w(c) * logp(c), 0.0))
    return positions.valid(pos, ignore_index) * picked


def _reduce(positions, reduction, nll, weight, ignore_index, smooth=None, label_smoothing=0.0):
    """Reduce nll(pos) (plus, with label smoothing, smooth(pos)) over positions as torch does."""
    def loss(pos, nll_scale, smooth_scale):
        out = nll(pos) * nll_scale
        return out if smooth is None else out + smooth(pos) * smooth_scale

    keep, spread = 1.0 - label_smoothing, label_smoothing / positions.classes
    if reduction == "none":
        return Compute(positions.names, lambda *pos: loss(pos, keep, spread))
    if reduction == "sum":
        return Compute([], lambda: positions.over(lambda pos: loss(pos, keep, spread)))
    total = positions.over(
        lambda pos: positions.valid(pos, ignore_index) * positions.class_weight(weight, pos))
    return Compute([], lambda: positions.over(lambda pos: loss(pos, keep / total, spread / total)))


@op(weights=("weight",), saves="nothing", keeps_inside=((1.0, None),), example=(([4, 5], [4]), {"ignore_index": 1}))
def cross_entropy(x, target, weight=None, *, reduction="mean", ignore_index=-100, label_smoothing=0.0):
    """log_softmax over classes, then nll_loss (class-index targets; see the module docstring)."""
    positions = Positions("cross_entropy", x, target, reduction)

    def per_position(pos):
        lse = _lse(positions, pos)
        return _nll(positions, weight, pos, lambda c: positions.at(pos, c) - lse, ignore_index)

    def smooth(pos):
        lse = _lse(positions, pos)
        w = (lambda c: 1.0) if weight is None else (lambda c: weight[c])
        total = Sum(lambda c: w(c) * (lse - positions.at(pos, c)))
        return positions.valid(pos, ignore_index) * total

    return _reduce(positions, reduction, per_position, weight, ignore_index,
                   smooth if label_smoothing else None, label_smoothing)


@op(weights=("weight",), example=(([4, 5], [4]), {}))
def nll_loss(x, target, weight=None, *, reduction="mean", ignore_index=-100):
    """-w[t] * x[n, t[n]] for log-probabilities x, reduced as cross_entropy."""
    positions = Positions("nll_loss", x, target, reduction)
    return _reduce(positions, reduction,
                   lambda pos: _nll(positions, weight, pos, lambda c: positions.at(pos, c), ignore_index),
                   weight, ignore_index)


@op(example=([4, 5], [4, 5]))
def mse_loss(x, y, *, reduction="mean"):
    """(x - y)^2, its mean or its sum over every element."""
    if reduction not in REDUCTIONS:
        raise TDLError("op 'mse_loss': unknown reduction", expected=str(REDUCTIONS), got=repr(reduction))
    if reduction == "none":
        return pointwise("mse_loss", (x, y), lambda a, b: (a - b) * (a - b))
    shape = broadcast_shape("mse_loss", x.shape, y.shape)
    scale = 1.0 / numel(shape) if reduction == "mean" else 1.0

    def squared(*idx):
        a = x[idx[len(idx) - x.ndim:]]
        b = y[idx[len(idx) - y.ndim:]]
        return (a - b) * (a - b)

    if tuple(x.shape) != tuple(y.shape):
        raise TDLError("op 'mse_loss' with a reduction needs equal shapes",
                       got=f"{list(x.shape)} and {list(y.shape)}")
    return Compute([], lambda: Sum(Compute(names("r", range(len(shape))), squared)) * scale)
