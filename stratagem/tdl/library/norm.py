"""Normalizations.

Layer norm, RMS norm and group norm normalize within one sample, so each is one op: its
statistics are nested reductions, and splitting a normalized dim makes every worker read the
whole normalized row (x `R`), which the analysis finds on its own.

Batch norm in training mode normalizes with statistics over (batch, *spatial). Written as one op
those statistics would be nested reductions over the batch, so a batch split would have to
replicate x, and data parallelism could not be found. It is therefore two ops:

    batch_norm_stats(x)[s, c] = Sum(b, *sp: x[b, c, *sp] if s == 0 else x[b, c, *sp]^2)   -> [2, C]
    batch_norm_apply(x, stats, weight, bias)[b, c, *sp] =
        (x - mean[c]) * rsqrt(var[c] + eps) * weight[c] + bias[c],
        mean = stats[0, c] / count,  var = stats[1, c] / count - mean^2

The statistics are one top-level Sum over (b, *sp): splitting b leaves them P(sum), the partial
sums that SyncBatchNorm all-reduces; `batch_norm_apply` is elementwise in x, and takes `count`
(elements per channel over the whole batch) as an attribute, so a batch shard still divides by
the global count. The running statistics' next values (which PyTorch writes into the buffers) are
`batch_norm_running`, elementwise in the channel, from the same statistics:

    batch_norm_running(stats, running)[c] = (1 - momentum) running[c] + momentum batch[c],
        batch = mean (which 0), or the unbiased variance var * count / (count - 1) (which 1)

Inference-mode `batch_norm` uses the running statistics and is elementwise.
"""

from __future__ import annotations

from stratagem.errors import TDLError
from stratagem.tdl.expr import Compute, Sum, rsqrt, where
from stratagem.tdl.library.common import names, numel
from stratagem.tdl.trace import op

FLOAT32_EPS = 1.1920928955078125e-07     # torch.finfo(torch.float32).eps, rms_norm's eps=None


def _normalized(name, x, normalized_shape):
    shape = tuple(int(s) for s in normalized_shape)
    if not shape or tuple(x.shape[x.ndim - len(shape):]) != shape or len(shape) > x.ndim:
        raise TDLError(f"op {name!r}: normalized_shape does not match the input's last dims",
                       expected=f"a suffix of {list(x.shape)}", got=str(list(shape)))
    return x.ndim - len(shape)


def _affine(value, weight, bias, idx):
    out = value if weight is None else value * weight[idx]
    return out if bias is None else out + bias[idx]


@op(weights=("weight", "bias"), example=(([4, 5, 6], [6], [6]), {"normalized_shape": (6,)}))
def layer_norm(x, weight=None, bias=None, *, normalized_shape, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last len(normalized_shape) dims."""
    lead = _normalized("layer_norm", x, normalized_shape)
    count = float(numel(x.shape[lead:]))
    red = names("r", range(lead, x.ndim))

    def body(*idx):
        head = idx[:lead]
        mean = Sum(Compute(red, lambda *r: x[(*head, *r)])) / count
        var = Sum(Compute(red, lambda *r: (x[(*head, *r)] - mean) * (x[(*head, *r)] - mean))) / count
        return _affine((x[idx] - mean) * rsqrt(var + eps), weight, bias, idx[lead:])

    return Compute(names("d", range(x.ndim)), body)


@op(weights=("weight",), keeps_inside=((1.0, "weight"),),
    example=(([4, 5, 6], [6]), {"normalized_shape": (6,), "eps": 1e-6}))
def rms_norm(x, weight=None, *, normalized_shape, eps=None):
    """x / sqrt(mean(x^2) + eps) * weight (LLaMA, T5); eps=None is float32's machine epsilon."""
    lead = _normalized("rms_norm", x, normalized_shape)
    count = float(numel(x.shape[lead:]))
    red = names("r", range(lead, x.ndim))
    eps = FLOAT32_EPS if eps is None else eps

    def body(*idx):
        head = idx[:lead]
        mean_square = Sum(Compute(red, lambda *r: x[(*head, *r)] * x[(*head, *r)])) / count
        return _affine(x[idx] * rsqrt(mean_square + eps), weight, None, idx[lead:])

    return Compute(names("d", range(x.ndim)), body)


@op(weights=("weight", "bias"), example=(([2, 6, 5], [6], [6]), {"num_groups": 3}))
def group_norm(x, weight=None, bias=None, *, num_groups, eps=1e-5):
    """Normalize each group of C / num_groups channels (and all positions) of a sample."""
    if x.ndim < 2 or x.shape[1] % num_groups:
        raise TDLError("op 'group_norm' needs [B, C, ...] with C divisible by num_groups",
                       got=f"shape {list(x.shape)}, num_groups={num_groups}")
    per_group = x.shape[1] // num_groups
    count = float(per_group * numel(x.shape[2:]))
    red = ["rc", *names("r", range(2, x.ndim))]

    def body(b, c, *sp):
        def at(rc, *r):
            return x[(b, (c // per_group) * per_group + rc, *r)]
        mean = Sum(Compute(red, at), rc=per_group) / count
        var = Sum(Compute(red, lambda *r: (at(*r) - mean) * (at(*r) - mean)), rc=per_group) / count
        return _affine((x[(b, c, *sp)] - mean) * rsqrt(var + eps), weight, bias, (c,))

    return Compute(["b", "c", *names("d", range(2, x.ndim))], body)


def _channel_names(x, name):
    if x.ndim < 2:
        raise TDLError(f"op {name!r} needs [B, C, ...]", got=f"shape {list(x.shape)}")
    return ["b", "c", *names("d", range(2, x.ndim))]


@op(weights=("running_mean", "running_var", "weight", "bias"),
    example=([4, 3, 5, 5], [3], [3], [3], [3]))
def batch_norm(x, running_mean, running_var, weight=None, bias=None, *, eps=1e-5):
    """Inference batch norm: (x - running_mean) / sqrt(running_var + eps) * weight + bias per channel."""
    def body(b, c, *sp):
        normalized = (x[(b, c, *sp)] - running_mean[c]) * rsqrt(running_var[c] + eps)
        return _affine(normalized, weight, bias, (c,))

    return Compute(_channel_names(x, "batch_norm"), body)


@op(shape=lambda x: (2, x.shape[1]), example=([4, 3, 5, 5],))
def batch_norm_stats(x):
    """Per channel: [sum of x, sum of x^2] over batch and positions (training batch norm, part 1)."""
    _channel_names(x, "batch_norm_stats")
    red = ["rb", *names("r", range(2, x.ndim))]

    def body(s, c):
        def term(rb, *r):
            v = x[(rb, c, *r)]
            return where(s == 0, v, v * v)
        return Sum(Compute(red, term), **{n: x.shape[d] for n, d in zip(red, [0, *range(2, x.ndim)])})

    return Compute(["s", "c"], body)


@op(saves="nothing", weights=("running",), example=(([2, 3], [3]), {"which": 1, "momentum": 0.1, "count": 100}))
def batch_norm_running(stats, running, *, which, momentum, count):
    """A running statistic's next value after one training step, as PyTorch's batch norm writes it."""
    if tuple(stats.shape) != (2, running.shape[0]) or which not in (0, 1) or count < 2:
        raise TDLError("op 'batch_norm_running': stats [2, C], running [C], which 0 or 1, count > 1",
                       got=f"{list(stats.shape)}, {list(running.shape)}, which={which}, count={count}")

    def body(c):
        mean = stats[0, c] / float(count)
        batch = mean if which == 0 else (stats[1, c] / float(count) - mean * mean) * (count / (count - 1))
        return running[c] * (1.0 - momentum) + batch * momentum

    return Compute(["c"], body)


@op(weights=("weight", "bias"), saves="nothing", keeps_inside=((1.0, None), (1.0, "weight")),
    example=(([4, 3, 5, 5], [2, 3], [3], [3]), {"count": 100}))
def batch_norm_apply(x, stats, weight=None, bias=None, *, eps=1e-5, count):
    """Normalize with batch statistics from batch_norm_stats (training batch norm, part 2)."""
    if tuple(stats.shape) != (2, x.shape[1]):
        raise TDLError("op 'batch_norm_apply': stats must be [2, C]", expected=str([2, x.shape[1]]),
                       got=str(list(stats.shape)))

    def body(b, c, *sp):
        mean = stats[0, c] / float(count)
        var = stats[1, c] / float(count) - mean * mean
        return _affine((x[(b, c, *sp)] - mean) * rsqrt(var + eps), weight, bias, (c,))

    return Compute(_channel_names(x, "batch_norm_apply"), body)
