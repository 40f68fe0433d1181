"""Normalizations. rms_norm's eps=None is float32's epsilon, as in the TDL description (torch
would use the input dtype's)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from stratagem.frontend.torch_impl.common import optional

FLOAT32_EPS = float(torch.finfo(torch.float32).eps)


def _layer_norm(inputs, attrs, out_shape):
    return F.layer_norm(inputs[0], tuple(attrs["normalized_shape"]), optional(inputs, 1),
                        optional(inputs, 2), attrs["eps"])


def _rms_norm(inputs, attrs, out_shape):
    eps = FLOAT32_EPS if attrs["eps"] is None else attrs["eps"]
    return F.rms_norm(inputs[0], tuple(attrs["normalized_shape"]), optional(inputs, 1), eps)


def _group_norm(inputs, attrs, out_shape):
    return F.group_norm(inputs[0], attrs["num_groups"], optional(inputs, 1), optional(inputs, 2),
                        attrs["eps"])


def _batch_norm(inputs, attrs, out_shape):
    x, mean, var = inputs[:3]
    return F.batch_norm(x, mean, var, optional(inputs, 3), optional(inputs, 4), training=False,
                        eps=attrs["eps"])


def _per_channel(t, x):
    """A [C] tensor shaped to broadcast over x [B, C, ...]."""
    return t.reshape(1, -1, *([1] * (x.dim() - 2)))


def _batch_norm_stats(inputs, attrs, out_shape):
    x = inputs[0]
    dims = [0, *range(2, x.dim())]
    return torch.stack([x.sum(dims), (x * x).sum(dims)])


def _batch_norm_running(inputs, attrs, out_shape):
    stats, running = inputs
    count, momentum = attrs["count"], attrs["momentum"]
    mean = stats[0] / count
    batch = mean if attrs["which"] == 0 else (stats[1] / count - mean * mean) * (count / (count - 1))
    return running * (1 - momentum) + batch * momentum


def _batch_norm_apply(inputs, attrs, out_shape):
    x, stats = inputs[0], inputs[1]
    mean = stats[0] / attrs["count"]
    var = stats[1] / attrs["count"] - mean * mean
    out = (x - _per_channel(mean, x)) * torch.rsqrt(_per_channel(var, x) + attrs["eps"])
    weight, bias = optional(inputs, 2), optional(inputs, 3)
    if weight is not None:
        out = out * _per_channel(weight, x)
    return out if bias is None else out + _per_channel(bias, x)


IMPLS = {
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
    "group_norm": _group_norm,
    "batch_norm": _batch_norm,
    "batch_norm_stats": _batch_norm_stats,
    "batch_norm_apply": _batch_norm_apply,
    "batch_norm_running": _batch_norm_running,
}
