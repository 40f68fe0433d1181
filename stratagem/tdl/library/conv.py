"""Convolutions (Tofu Fig. 3, in PyTorch's layout): weight [Co, Ci / groups, *kernel].

    conv2d(x, weight, bias)[b, co, h, w] =
        Sum(ci, kh, kw: x[b, g(co) * Ci/groups + ci, h*sh + kh*dh - ph, w*sw + kw*dw - pw]
                        * weight[co, ci, kh, kw]) + bias[co]

with g(co) = co // (Co / groups) the group of output channel co (zero when groups == 1, and
then simplified away). Zero padding is a padded read. The analysis derives FlexFlow's Table 2 for
it: b sample; h, w attribute (a halo split, irregular); co parameter; ci, kh, kw reduction.
"""

from __future__ import annotations

from stratagem.errors import TDLError
from stratagem.tdl.expr import Compute, Sum
from stratagem.tdl.library.common import ints
from stratagem.tdl.trace import op

SPATIAL = {1: (["l"], ["k"]), 2: (["h", "w"], ["kh", "kw"])}


def conv_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _params(name, x, weight, n, stride, padding, dilation, groups):
    if x.ndim != n + 2 or weight.ndim != n + 2:
        raise TDLError(f"op {name!r} needs a batched input [B, C, {n} spatial dims] and a weight "
                       f"[Co, Ci/groups, {n} kernel dims]",
                       got=f"x {list(x.shape)}, weight {list(weight.shape)}",
                       hint="Unsqueeze an unbatched input first")
    ci, co = x.shape[1], weight.shape[0]
    if ci % groups or co % groups or weight.shape[1] * groups != ci:
        raise TDLError(f"op {name!r}: channels do not fit groups={groups}",
                       expected="Ci and Co divisible by groups, weight.shape[1] == Ci / groups",
                       got=f"Ci={ci}, Co={co}, weight {list(weight.shape)}")
    return (ints(stride, n, name, "stride"), ints(padding, n, name, "padding"),
            ints(dilation, n, name, "dilation"))


def _conv_shape(n):
    def shape(x, weight, bias=None, *, stride=1, padding=0, dilation=1, groups=1):
        s, p, d = (ints(v, n, "conv", a) for v, a in
                   ((stride, "stride"), (padding, "padding"), (dilation, "dilation")))
        spatial = [conv_output_size(x.shape[2 + i], weight.shape[2 + i], s[i], p[i], d[i])
                   for i in range(n)]
        return (x.shape[0], weight.shape[0], *spatial)
    return shape


def conv(name, n, x, weight, bias, stride, padding, dilation, groups):
    """The n-d convolution description (n = 1 or 2)."""
    s, p, d = _params(name, x, weight, n, stride, padding, dilation, groups)
    cog, cig = weight.shape[0] // groups, weight.shape[1]
    source = x.padded(0.0) if any(p) else x
    out_names, kernel_names = SPATIAL[n]

    def body(b, co, *pos):
        def term(ci, *k):
            window = tuple(pos[i] * s[i] + k[i] * d[i] - p[i] for i in range(n))
            return source[(b, (co // cog) * cig + ci, *window)] * weight[(co, ci, *k)]

        out = Sum(Compute(["ci", *kernel_names], term))
        return out if bias is None else out + bias[co]

    return Compute(["b", "co", *out_names], body)


@op(weights=("weight", "bias"), shape=_conv_shape(1), float32_math="tfloat32",
    example=(([2, 4, 9], [6, 4, 3], [6]), {"padding": 1}))
def conv1d(x, weight, bias=None, *, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution over [B, Ci, L] (Tofu's conv1d)."""
    return conv("conv1d", 1, x, weight, bias, stride, padding, dilation, groups)


@op(weights=("weight", "bias"), shape=_conv_shape(2), float32_math="tfloat32",
    example=(([2, 4, 7, 7], [6, 4, 3, 3], [6]), {"padding": 1}))
def conv2d(x, weight, bias=None, *, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution over [B, Ci, H, W]."""
    return conv("conv2d", 2, x, weight, bias, stride, padding, dilation, groups)
