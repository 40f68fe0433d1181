"""Run one op on one device's local shards: the plain kernel, or an adapter that supplies what a
shard does not know (space.runnable.SPLIT_RULES says which splits need which adapter).

    run_local(op, attrs, inputs, view, analysis, adapter)
        inputs   local tensors in the op's input order; None where the device reads nothing
        view     runtime.views.WorkerView: this device's chunk of every split dim, its output box
        result   what the device holds of the output under the op's layout (its chunk, or its
                 partial sum for a split reduction)

Adapters (each runs the kernel, or torch directly, then corrects it):
    rescale_count      mean / mse_loss over a split reduction: local mean * local count / whole count
    positions_loss     cross_entropy / nll_loss: the local sum over this device's positions divided
                       by the whole batch's weight (targets are replicated to count it)
    whole_row          softmax along the split dim: the row is replicated; keep this device's chunk
    norm_whole_row     layer / RMS norm along a split normalized dim: normalize the whole row, keep
                       the chunk, then apply the local weight and bias chunks
    dropout_positions  the counter-based mask at the elements' global positions (tdl.rng)
    attention_positions  attention with dropout over a split batch, head or query dim: the mask at
                       the attention weights' global positions in [B, H, L, S]
    vocab_parallel     embedding over a split vocabulary: rows outside the shard give zeros
    window             convolution or pooling over split positions: the input arrives as this
                       device's region (its rows and the halo, runtime.halo); padded or cropped by
                       hand to exactly the rows its windows span (zeros, or -inf for max pooling,
                       where they cross the whole tensor's padding), then the kernel without padding
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from stratagem.frontend.calls import run_call
from stratagem.frontend.torch_impl.nn import attention_with_keep
from stratagem.frontend.torch_impl.rng import uniform
from stratagem.frontend.torch_ops import TORCH_OPS
from stratagem.ir import Attrs
from stratagem.runtime.errors import ExecutionError
from stratagem.runtime.views import WorkerView, local_extent
from stratagem.tdl.rng import dropout_counter

Adapter = Callable[[list[Any], Mapping[str, Any], WorkerView, Any], Any]


def run_local(kind: str, attrs: Mapping[str, Any], inputs: list[Any], view: WorkerView, analysis,
              adapter: str | None = None) -> Any:
    if kind == "opaque":
        return run_call(local_call(attrs, view.out_shape), inputs)
    if adapter is not None:
        return ADAPTERS[adapter](_trimmed(inputs), attrs, view, analysis)
    return TORCH_OPS[kind](_trimmed(inputs), attrs, view.out_shape)


def _trimmed(inputs: list[Any]) -> list[Any]:
    out = list(inputs)
    while out and out[-1] is None:
        out.pop()
    return out


def local_call(attrs: Mapping[str, Any], local_shape: tuple[int, ...]) -> Attrs:
    """The recorded ATen call with every size argument equal to the whole output shape replaced by
    the local one (a batch-split opaque op)."""
    whole = tuple(attrs["out_shape"])
    call = attrs["call"]

    def swap(value):
        if isinstance(value, tuple):
            return tuple(local_shape) if value == whole and value != tuple(local_shape) else tuple(
                swap(v) for v in value)
        return value

    return Attrs(target=call["target"], args=swap(call["args"]),
                 kwargs=Attrs({k: swap(v) for k, v in call["kwargs"].items()}),
                 output_index=call["output_index"])


# ---- shared helpers -----------------------------------------------------------------------------

def narrow_to(out: torch.Tensor, view: WorkerView) -> torch.Tensor:
    """Keep this device's box of a tensor the kernel computed whole along some split dims."""
    for d, (start, stop) in enumerate(view.out_box):
        if out.shape[d] != stop - start:
            out = out.narrow(d, start, stop - start)
    return out


def _reduction_fraction(analysis, view: WorkerView) -> float:
    local = whole = 1
    for d in analysis.dims:
        if d.is_reduction:
            local *= local_extent(analysis, view, d.name)
            whole *= d.size
    return local / whole


# ---- adapters -----------------------------------------------------------------------------------

def _rescale_count(inputs, attrs, view, analysis):
    out = TORCH_OPS[analysis.desc.op_name](inputs, attrs, view.out_shape)
    if attrs.get("reduction", "mean") != "mean":
        return out
    return out * _reduction_fraction(analysis, view)


def _position_slices(analysis, view: WorkerView) -> tuple[slice, ...]:
    """This device's positions (n, d2, d3, ...) as slices of the target [N, *d]."""
    names = ["n", *[f"d{k}" for k in range(2, len(analysis.input_shapes[0]))]]
    return tuple(slice(*view.assignment.get(name, (0, analysis.dim(name).size))) for name in names)


def _positions_loss(inputs, attrs, view, analysis):
    x, target = inputs[0], inputs[1].long()
    weight = inputs[2] if len(inputs) > 2 else None
    whole_target = target
    if tuple(target.shape) != (x.shape[0], *x.shape[2:]):
        target = target[_position_slices(analysis, view)]
    kwargs = dict(ignore_index=attrs["ignore_index"], reduction="sum")
    if analysis.desc.op_name == "cross_entropy":
        total = F.cross_entropy(x, target, weight, label_smoothing=attrs["label_smoothing"], **kwargs)
    else:
        total = F.nll_loss(x, target, weight, **kwargs)
    if attrs["reduction"] != "mean":
        return total
    return total / _target_weight(whole_target, weight, attrs["ignore_index"])


def _target_weight(target: torch.Tensor, weight: torch.Tensor | None, ignore_index: int) -> torch.Tensor:
    valid = target != ignore_index
    if weight is None:
        return valid.sum().to(torch.get_default_dtype())
    return (weight.detach()[target.clamp(0, weight.shape[0] - 1)] * valid).sum()


def _whole_row(inputs, attrs, view, analysis):
    return narrow_to(TORCH_OPS[analysis.desc.op_name](inputs, attrs, view.out_shape), view)


def _norm_whole_row(inputs, attrs, view, analysis):
    x, weight = inputs[0], inputs[1] if len(inputs) > 1 else None
    bias = inputs[2] if len(inputs) > 2 else None
    plain = TORCH_OPS[analysis.desc.op_name]([x], attrs, view.out_shape)
    out = narrow_to(plain, view)
    if weight is not None:
        out = out * weight
    return out if bias is None else out + bias


def _dropout_positions(inputs, attrs, view, analysis):
    x, p = inputs[0], attrs["p"]
    if not attrs["train"] or p == 0:
        return x.clone()
    positions = _global_positions(analysis.output_shape, view.out_box, x.device)
    keep = uniform(positions + dropout_counter(attrs["seed"], 0)) >= p
    return torch.where(keep, x * (1.0 / (1.0 - p)), torch.zeros((), dtype=x.dtype, device=x.device))


def _attention_positions(inputs, attrs, view, analysis):
    """Attention with dropout on a shard of batch, heads or queries: the mask at the weights' global
    positions in [B, H, L, S] (every key is local: a split of the keys is refused)."""
    q, k, v = inputs[:3]
    batch, heads, queries = analysis.output_shape[:3]
    keys = analysis.input_shapes[1][2]
    box = (*view.out_box[:3], (0, keys))
    positions = _global_positions((batch, heads, queries, keys), box, q.device)
    keep = uniform(positions + dropout_counter(attrs["seed"], 0)) >= attrs["dropout_p"]
    return attention_with_keep(q, k, v, inputs[3] if len(inputs) > 3 else None, attrs, keep)


def _global_positions(shape: Sequence[int], box, device) -> torch.Tensor:
    """Row-major positions in the whole tensor of `shape` of every element of `box`: one int64 written
    per element (the partial sums over the trailing dims are smaller), none multiplied by 1 or
    added to 0 (tdl.rng.MASK_BYTES_PER_DRAW counts these bytes)."""
    positions = None
    stride = 1
    for d in reversed(range(len(shape))):
        start, stop = box[d]
        index = torch.arange(start, stop, dtype=torch.int64, device=device)
        index = (index if stride == 1 else index * stride).reshape(-1, *([1] * (len(shape) - 1 - d)))
        positions = index if positions is None else positions + index
        stride *= shape[d]
    return torch.zeros((), dtype=torch.int64, device=device) if positions is None else positions


def _vocab_parallel(inputs, attrs, view, analysis):
    indices, weight = inputs[0].long(), inputs[1]
    start, stop = view.assignment.get("v", (0, weight.shape[0]))
    inside = (indices >= start) & (indices < stop)
    local = torch.where(inside, indices - start, torch.zeros_like(indices))
    return F.embedding(local, weight) * inside.unsqueeze(-1).to(weight.dtype)


def _window(inputs, attrs, view, analysis):
    """Output rows [o0, o1) of a window (kernel k, stride s, padding p, dilation d) read input rows
    [o0 s - p, (o1 - 1) s + d (k - 1) + 1 - p): rows below 0 or past the end are the padding."""
    kind = analysis.desc.op_name
    x, rank = inputs[0], int(kind[-2])
    kernel = tuple(inputs[1].shape[2:]) if kind.startswith("conv") else _per_dim(attrs["kernel_size"], rank)
    stride = _per_dim(attrs.get("stride") or kernel, rank)
    padding, dilation = _per_dim(attrs.get("padding", 0), rank), _per_dim(attrs.get("dilation", 1), rank)
    fill = float("-inf") if kind.startswith("max_pool") else 0.0
    for i in range(rank):
        dim, out = x.dim() - rank + i, len(view.out_box) - rank + i
        (o0, o1), (i0, i1) = view.out_box[out], view.in_boxes[0][dim]
        start = o0 * stride[i] - padding[i]
        stop = (o1 - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 - padding[i]
        x = _padded_to(x, dim, (i0, i1), (start, stop), analysis.input_shapes[0][dim], fill)
    plain = {**attrs, "padding": 0, "ceil_mode": False} if "ceil_mode" in attrs else {**attrs, "padding": 0}
    return TORCH_OPS[kind]([x, *inputs[1:]], plain, view.out_shape)


def _per_dim(value, rank: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) and len(value) == rank else (
        tuple(value) * rank if isinstance(value, (tuple, list)) else (value,) * rank)


def _padded_to(x: torch.Tensor, dim: int, held: tuple[int, int], wanted: tuple[int, int], size: int,
               fill: float) -> torch.Tensor:
    """Rows `wanted` of the whole dim (of length `size`) from the rows `held`: cropped where held
    has more, filled where wanted leaves the tensor."""
    (i0, i1), (start, stop) = held, wanted
    if (start < i0 and i0 > 0) or (stop > i1 and i1 < size):
        raise ExecutionError("a window's input region misses rows inside the tensor",
                             expected=f"rows {start}..{stop} of dim {dim} (padding outside 0..{size})",
                             got=f"rows {i0}..{i1}", hint="the halo exchange (runtime.halo) delivered too few")
    x = x.narrow(dim, max(start, i0) - i0, min(stop, i1) - max(start, i0))
    before, after = max(0, i0 - start), max(0, stop - i1)
    if before or after:
        pad = [0, 0] * (x.dim() - 1 - dim) + [before, after]
        x = F.pad(x, pad, value=fill)
    return x


ADAPTERS: Mapping[str, Adapter] = {
    "window": _window,
    "rescale_count": _rescale_count,
    "positions_loss": _positions_loss,
    "whole_row": _whole_row,
    "norm_whole_row": _norm_whole_row,
    "dropout_positions": _dropout_positions,
    "attention_positions": _attention_positions,
    "vocab_parallel": _vocab_parallel,
}


# ---- profiling ------------------------------------------------------------------------------------

def _profiled_loss(kind: str):
    """A loss on a shard of positions, as a profile request gives it (no view): the replicated
    targets are cut to the local positions; the time is the adapter's."""
    def impl(inputs, attrs, out_shape):
        x, target = inputs[0], inputs[1]
        if tuple(target.shape) != (x.shape[0], *x.shape[2:]):
            target = target[tuple(slice(0, n) for n in (x.shape[0], *x.shape[2:]))]
        return TORCH_OPS[kind]([x, target, *inputs[2:]], attrs, out_shape)
    return impl


def _profiled_norm(kind: str):
    """A norm over a split normalized dim, as a profile request gives it: the whole row is
    normalized, then the local chunk of the weight (and bias) applied."""
    def impl(inputs, attrs, out_shape):
        rest = [t for t in inputs[1:] if t is not None]
        if not rest or tuple(rest[0].shape) == tuple(attrs["normalized_shape"]):
            return TORCH_OPS[kind](inputs, attrs, out_shape)
        box = tuple((0, n) for n in out_shape)
        return _norm_whole_row(inputs, attrs, WorkerView({}, box, (True,) * len(inputs), True),
                               _KindOnly(kind))
    return impl


class _KindOnly:
    """What _norm_whole_row reads of an analysis: the op's kind."""

    def __init__(self, kind: str):
        self.desc = type("Desc", (), {"op_name": kind})()


def profile_impls() -> Mapping[str, Adapter]:
    """TORCH_OPS, with the kernels the runtime's adapters run where a request's local shapes
    would not fit the plain kernel (a profiled table then prices what the runtime executes)."""
    return {**TORCH_OPS, "cross_entropy": _profiled_loss("cross_entropy"), "nll_loss": _profiled_loss("nll_loss"),
            "layer_norm": _profiled_norm("layer_norm"), "rms_norm": _profiled_norm("rms_norm")}
