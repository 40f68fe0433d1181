"""Convolution, pooling, nearest upsampling. `groups` is taken from the shapes
(x.shape[1] // weight.shape[1]), so a worker given whole groups of channels runs as it is."""

from __future__ import annotations

import torch.nn.functional as F

from stratagem.frontend.torch_impl.common import optional


def _conv(fn):
    def impl(inputs, attrs, out_shape):
        x, weight = inputs[0], inputs[1]
        return fn(x, weight, optional(inputs, 2), stride=attrs["stride"], padding=attrs["padding"],
                  dilation=attrs["dilation"], groups=x.shape[1] // weight.shape[1])
    return impl


def _max_pool(fn):
    def impl(inputs, attrs, out_shape):
        return fn(inputs[0], attrs["kernel_size"], attrs["stride"] or None, attrs["padding"],
                  attrs["dilation"], ceil_mode=attrs["ceil_mode"])
    return impl


def _avg_pool1d(inputs, attrs, out_shape):
    return F.avg_pool1d(inputs[0], attrs["kernel_size"], attrs["stride"] or None, attrs["padding"],
                        attrs["ceil_mode"], attrs["count_include_pad"])


def _avg_pool(fn):
    def impl(inputs, attrs, out_shape):
        return fn(inputs[0], attrs["kernel_size"], attrs["stride"] or None, attrs["padding"],
                  attrs["ceil_mode"], attrs["count_include_pad"], attrs["divisor_override"])
    return impl


def _upsample_nearest2d(inputs, attrs, out_shape):
    x = inputs[0]
    batched = x if x.dim() == 4 else x.unsqueeze(0)
    out = F.interpolate(batched, size=tuple(out_shape[-2:]), mode="nearest")
    return out if x.dim() == 4 else out.squeeze(0)


IMPLS = {
    "conv1d": _conv(F.conv1d),
    "conv2d": _conv(F.conv2d),
    "max_pool1d": _max_pool(F.max_pool1d),
    "max_pool2d": _max_pool(F.max_pool2d),
    "avg_pool1d": _avg_pool1d,
    "avg_pool2d": _avg_pool(F.avg_pool2d),
    "max_pool3d": _max_pool(F.max_pool3d),
    "avg_pool3d": _avg_pool(F.avg_pool3d),
    "adaptive_avg_pool3d": lambda inputs, attrs, out_shape: F.adaptive_avg_pool3d(inputs[0], out_shape[-3:]),
    "adaptive_avg_pool1d": lambda inputs, attrs, out_shape: F.adaptive_avg_pool1d(inputs[0], out_shape[-1]),
    "adaptive_avg_pool2d": lambda inputs, attrs, out_shape: F.adaptive_avg_pool2d(inputs[0], out_shape[-2:]),
    "upsample_nearest2d": _upsample_nearest2d,
}
