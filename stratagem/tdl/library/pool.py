"""Pooling over the last 1, 2 or 3 dims of [B, C, ...] or [C, ...], and nearest upsampling.

    max_pool2d(x)[b, c, h, w] = Max(kh, kw: x.padded(-inf)[b, c, h*sh + kh*dh - ph, w*sw + kw*dw - pw])
    avg_pool2d(x)[b, c, h, w] = Sum(kh, kw: x.padded(0)[...]) / divisor

FlexFlow Table 2: b sample, c and the positions attribute (no weights); the kernel dims are
reductions (P(max) or P(sum)). `ceil_mode` lengthens the output of max pooling (the extra windows
read -inf padding); for average pooling it changes the divisor of the last windows, which is not
described: it raises. Adaptive average pooling is described when the input size is a multiple of
the output size (then it is average pooling); other sizes have windows of varying length whose
regions the interval analysis over-approximates, so they raise.
"""

from __future__ import annotations

from stratagem.errors import TDLError
from stratagem.tdl.expr import Compute, Max, Sum, maximum, minimum, to_value
from stratagem.tdl.library.common import NEG_INF, ints, numel
from stratagem.tdl.trace import op

POSITIONS = {1: ["l"], 2: ["h", "w"], 3: ["d", "h", "w"]}
KERNELS = {1: ["k"], 2: ["kh", "kw"], 3: ["kd", "kh", "kw"]}


def lead_names(x, n: int, name: str) -> list[str]:
    lead = x.ndim - n
    if lead not in (1, 2):
        raise TDLError(f"op {name!r} pools the last {n} dim(s) of [B, C, ...] or [C, ...]",
                       got=f"rank {x.ndim}")
    return ["b", "c"][2 - lead:]


def pool_output_size(size, kernel, stride, padding, dilation, ceil_mode) -> int:
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1                              # the last window must start inside the input
    return out


def _window(name, n, kernel_size, stride, padding, dilation):
    k = ints(kernel_size, n, name, "kernel_size")
    s = ints(stride if stride not in (None, ()) else kernel_size, n, name, "stride")
    p = ints(padding, n, name, "padding")
    d = ints(dilation, n, name, "dilation")
    if any(2 * pi > ki for pi, ki in zip(p, k)):
        raise TDLError(f"op {name!r}: padding {p} exceeds half the kernel {k}",
                       expected="padding <= kernel_size / 2 (as torch requires)")
    return k, s, p, d


def _pool_shape(name, n, x, kernel_size, stride, padding, dilation, ceil_mode):
    k, s, p, d = _window(name, n, kernel_size, stride, padding, dilation)
    spatial = [pool_output_size(x.shape[x.ndim - n + i], k[i], s[i], p[i], d[i], ceil_mode)
               for i in range(n)]
    return (*x.shape[:x.ndim - n], *spatial)


def max_pool(name, n, x, kernel_size, stride, padding, dilation, ceil_mode):
    k, s, p, d = _window(name, n, kernel_size, stride, padding, dilation)
    source = x.padded(NEG_INF) if any(p) or ceil_mode else x

    def body(*idx):
        lead, pos = idx[:x.ndim - n], idx[x.ndim - n:]
        return Max(Compute(KERNELS[n], lambda *kk: source[
            (*lead, *(pos[i] * s[i] + kk[i] * d[i] - p[i] for i in range(n)))]), **dict(zip(KERNELS[n], k)))

    return Compute(lead_names(x, n, name) + POSITIONS[n], body)


def avg_pool(name, n, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    if ceil_mode:
        raise TDLError(f"op {name!r}: ceil_mode=True is not described",
                       expected="ceil_mode=False",
                       hint="its last windows divide by a clipped count; pad the input instead")
    k, s, p, _ = _window(name, n, kernel_size, stride, padding, 1)
    source = x.padded(0.0) if any(p) else x
    sizes = x.shape[x.ndim - n:]

    def divisor(pos):
        if divisor_override:
            return float(divisor_override)
        if count_include_pad or not any(p):
            return float(numel(k))
        count = None
        for i in range(n):
            start = pos[i] * s[i] - p[i]
            inside = minimum(to_value(start + k[i]), sizes[i]) - maximum(to_value(start), 0.0)
            count = inside if count is None else count * inside
        return count

    def body(*idx):
        lead, pos = idx[:x.ndim - n], idx[x.ndim - n:]
        total = Sum(Compute(KERNELS[n], lambda *kk: source[
            (*lead, *(pos[i] * s[i] + kk[i] - p[i] for i in range(n)))]), **dict(zip(KERNELS[n], k)))
        return total / divisor(pos)

    return Compute(lead_names(x, n, name) + POSITIONS[n], body)


@op(shape=lambda x, *, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False:
    _pool_shape("max_pool1d", 1, x, kernel_size, stride, padding, dilation, ceil_mode),
    example=(([2, 4, 9],), {"kernel_size": 3, "stride": 2, "padding": 1}))
def max_pool1d(x, *, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Max over windows of the last dim."""
    return max_pool("max_pool1d", 1, x, kernel_size, stride, padding, dilation, ceil_mode)


@op(shape=lambda x, *, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False:
    _pool_shape("max_pool2d", 2, x, kernel_size, stride, padding, dilation, ceil_mode),
    example=(([2, 4, 9, 9],), {"kernel_size": 3, "stride": 2, "padding": 1}))
def max_pool2d(x, *, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Max over windows of the last two dims."""
    return max_pool("max_pool2d", 2, x, kernel_size, stride, padding, dilation, ceil_mode)


@op(shape=lambda x, *, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True:
    _pool_shape("avg_pool1d", 1, x, kernel_size, stride, padding, 1, ceil_mode),
    example=(([2, 4, 9],), {"kernel_size": 3, "stride": 2}))
def avg_pool1d(x, *, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Mean over windows of the last dim."""
    return avg_pool("avg_pool1d", 1, x, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


@op(shape=lambda x, *, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
    divisor_override=None: _pool_shape("avg_pool2d", 2, x, kernel_size, stride, padding, 1, ceil_mode),
    example=(([2, 4, 8, 8],), {"kernel_size": 3, "stride": 1, "padding": 1}))
def avg_pool2d(x, *, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over windows of the last two dims (Inception's pooling branch)."""
    return avg_pool("avg_pool2d", 2, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                    divisor_override)


def _adaptive_shape(name, n):
    return lambda x, *, output_size: (*x.shape[:x.ndim - n], *ints(output_size, n, name, "output_size"))


def _adaptive_kernel(name, x, output_size, n):
    out = ints(output_size, n, name, "output_size")
    sizes = x.shape[x.ndim - n:]
    if any(o is None or o < 1 or size % o for size, o in zip(sizes, out)):
        raise TDLError(f"op {name!r}: input size {list(sizes)} is not a multiple of output_size "
                       f"{list(out)}", expected="divisible sizes (then it is avg pooling)",
                       hint="Windows of varying length are not described")
    return tuple(size // o for size, o in zip(sizes, out))


@op(shape=_adaptive_shape("adaptive_avg_pool1d", 1),
    example=(([2, 4, 9],), {"output_size": 3}))
def adaptive_avg_pool1d(x, *, output_size):
    """Mean over output_size equal windows of the last dim."""
    kernel = _adaptive_kernel("adaptive_avg_pool1d", x, output_size, 1)
    return avg_pool("adaptive_avg_pool1d", 1, x, kernel, kernel, 0, False, True, None)


@op(shape=_adaptive_shape("adaptive_avg_pool2d", 2),
    example=(([2, 4, 6, 6],), {"output_size": (1, 1)}))
def adaptive_avg_pool2d(x, *, output_size):
    """Mean over output_size equal windows of the last two dims (ResNet's global pool at (1, 1))."""
    kernel = _adaptive_kernel("adaptive_avg_pool2d", x, output_size, 2)
    return avg_pool("adaptive_avg_pool2d", 2, x, kernel, kernel, 0, False, True, None)


@op(shape=lambda x, *, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False:
    _pool_shape("max_pool3d", 3, x, kernel_size, stride, padding, dilation, ceil_mode),
    example=(([2, 3, 5, 6, 6],), {"kernel_size": 2, "stride": 2}))
def max_pool3d(x, *, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Max over windows of the last three dims."""
    return max_pool("max_pool3d", 3, x, kernel_size, stride, padding, dilation, ceil_mode)


@op(shape=lambda x, *, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
    divisor_override=None: _pool_shape("avg_pool3d", 3, x, kernel_size, stride, padding, 1, ceil_mode),
    example=(([2, 3, 5, 6, 6],), {"kernel_size": 2, "stride": 2}))
def avg_pool3d(x, *, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over windows of the last three dims."""
    return avg_pool("avg_pool3d", 3, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                    divisor_override)


@op(shape=_adaptive_shape("adaptive_avg_pool3d", 3), example=(([2, 3, 4, 6, 6],), {"output_size": (2, 3, 1)}))
def adaptive_avg_pool3d(x, *, output_size):
    """Mean over output_size equal windows of the last three dims."""
    kernel = _adaptive_kernel("adaptive_avg_pool3d", x, output_size, 3)
    return avg_pool("adaptive_avg_pool3d", 3, x, kernel, kernel, 0, False, True, None)


@op(saves="nothing", shape=lambda x, *, scale_factor: (*x.shape[:-2], *(s * f for s, f in zip(
        x.shape[-2:], ints(scale_factor, 2, "upsample_nearest2d", "scale_factor")))),
    example=(([2, 3, 4, 5],), {"scale_factor": 2}))
def upsample_nearest2d(x, *, scale_factor):
    """Nearest upsampling of the last two dims by integer factors: out[.., h, w] = x[.., h//f, w//f]."""
    f = ints(scale_factor, 2, "upsample_nearest2d", "scale_factor")
    if any(v < 1 for v in f):
        raise TDLError("op 'upsample_nearest2d': scale factors must be positive ints", got=repr(f))

    def body(*idx):
        lead, (h, w) = idx[:-2], idx[-2:]
        return x[(*lead, h // f[0], w // f[1])]

    return Compute(lead_names(x, 2, "upsample_nearest2d") + ["h", "w"], body)
