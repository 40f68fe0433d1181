"""Which configurations the runtime can execute, decided without torch (so searches can keep to them).

The runtime (stratagem.runtime) runs every op on LOCAL shards with its torch kernel. A configuration
runs when
  1. it uses all the plan's devices (a sub-block would need point-to-point transfers between meshes
     over different devices, which the runtime does not do);
  2. every input placement is a DTensor placement, or (a window split along a position dim) the
     input's regions are a halo of a regular layout (space.halo): the runtime exchanges the rows;
  3. every split is even (DTensor chunks with ceil, the TDL with floor: they agree only then);
  4. every output that a reduction split leaves partial is a partial sum (DTensor's backward of a
     P(max) treats it as a sum);
  5. each split dim is one the kernel runs on a shard as it is, or one a runtime adapter handles
     (`SPLIT_RULES`: kernel and dim -> adapter, or the reason it is refused);
  6. an opaque op (an ATen call the TDL cannot describe) is split only if its call was recorded.

`refusal(analysis, config, num_devices)` gives the first reason a configuration does not run, or
None (the op's kind and attributes are the analysis's: `desc.op_name`, `desc.attrs`);
`SpaceOptions(runnable=True)` makes enumeration keep only the configurations that run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from stratagem.space.config import Configuration, layout
from stratagem.space.halo import halo_exchange
from stratagem.space.placement import Partial
from stratagem.space.regions import input_boxes
from stratagem.space.tensor_layout import TensorLayout

Picks = Callable[[Any, Mapping[str, Any], str], bool]     # (analysis, attrs, dim) -> applies?


@dataclass(frozen=True)
class SplitRule:
    """A split the plain kernel gets wrong on a shard: run it through `adapter`, or refuse it."""

    picks: Picks
    adapter: str | None          # name in stratagem.runtime.localops.ADAPTERS; None: refused
    reason: str


def _reduction(analysis, attrs, dim) -> bool:
    return analysis.dim(dim).is_reduction


def _named(*names: str) -> Picks:
    return lambda analysis, attrs, dim: dim in names


def _attr_dim(attr: str) -> Picks:
    def picks(analysis, attrs, dim) -> bool:
        index, rank = analysis.output_dim_index(dim), len(analysis.output_shape)
        return index is not None and rank > 0 and index == attrs[attr] % rank
    return picks


def _normalized(analysis, attrs, dim) -> bool:
    index, rank = analysis.output_dim_index(dim), len(analysis.output_shape)
    return index is not None and index >= rank - len(attrs["normalized_shape"])


def _padded(analysis, attrs, dim) -> bool:
    pad, rank, index = attrs["pad"], len(analysis.output_shape), analysis.output_dim_index(dim)
    return any(tuple(pad[2 * k:2 * k + 2]) != (0, 0) and index == rank - 1 - k for k in range(len(pad) // 2))


def _repeated(analysis, attrs, dim) -> bool:
    index = analysis.output_dim_index(dim)
    return index is not None and attrs["repeats"][index] > 1


def _everything(analysis, attrs, dim) -> bool:
    return True


def _not_batch(analysis, attrs, dim) -> bool:
    return dim != "b"


def _position(analysis, attrs, dim) -> bool:
    """A loss's positions n, d2, d3, ... (not its classes c) under a reduction."""
    return analysis.dim(dim).is_reduction and (dim == "n" or dim[1:].isdigit())


KERNEL = "a shard of kernel offsets reads windows shifted by its offsets, partial sums of other positions"
HALO = "window positions: a shard reads its chunk's rows and its neighbours' (the halo)"
GLOBAL_COUNT = "divides by the element count of the whole reduction, a shard by its own"
GLOBAL_INDEX = "its values depend on each element's global position"

_REFUSED: dict[str, tuple[Picks, str]] = {
    **{k: (_named("k"), KERNEL) for k in ("conv1d", "max_pool1d", "avg_pool1d")},
    **{k: (_named("kh", "kw"), KERNEL) for k in ("conv2d", "max_pool2d", "avg_pool2d")},
    **{k: (_named("kd", "kh", "kw"), KERNEL) for k in ("max_pool3d", "avg_pool3d")},
    **{k: (_reduction, GLOBAL_COUNT) for k in ("adaptive_avg_pool1d", "adaptive_avg_pool2d",
                                                "adaptive_avg_pool3d", "var", "std")},
    "cumsum": (_reduction, "a shard sums a prefix of its own chunk, not of the whole dim"),
    "argmax": (_reduction, "positions are global; the kernel on a shard gives local ones"),
    "argmin": (_reduction, "positions are global; the kernel on a shard gives local ones"),
    "group_norm": (_not_batch, "normalizes over whole groups of channels and positions"),
    "batch_norm_stats": (_named("s"), "row 0 is the sum, row 1 the sum of squares: a shard of s "
                                      "does not know which it holds"),
    "triu": (_everything, "the diagonal is placed by global row and column"),
    "tril": (_everything, "the diagonal is placed by global row and column"),
    "pad": (_padded, "pads the ends of the whole dim, not of each shard"),
    "reflection_pad": (_padded, "pads the ends of the whole dim, not of each shard"),
    "replication_pad": (_padded, "pads the ends of the whole dim, not of each shard"),
    "slice_scatter": (_attr_dim("dim"), "the slice is placed by global position along dim"),
    "select_scatter": (_attr_dim("dim"), "the index is a global position along dim"),
    "scatter_add": (_attr_dim("dim"), "the indices are global positions along dim"),
    "repeat": (_repeated, "a chunk of a tiled dim need not hold whole tiles"),
    "index_select": (_reduction, "a shard of the gathered dim needs its indices shifted and masked"),
    "gather": (_reduction, "a shard of the gathered dim needs its indices shifted and masked"),
    "arange": (_everything, GLOBAL_INDEX),
}

_ADAPTED: dict[str, tuple[Picks, str, str]] = {
    "mean": (_reduction, "rescale_count", GLOBAL_COUNT),
    "mse_loss": (_reduction, "rescale_count", GLOBAL_COUNT),
    "softmax": (_attr_dim("dim"), "whole_row", "normalizes along the split dim"),
    "log_softmax": (_attr_dim("dim"), "whole_row", "normalizes along the split dim"),
    "layer_norm": (_normalized, "norm_whole_row", "normalizes along the split dim"),
    "rms_norm": (_normalized, "norm_whole_row", "normalizes along the split dim"),
    "dropout": (_everything, "dropout_positions", GLOBAL_INDEX),
    "embedding": (_reduction, "vocab_parallel", "a shard of the vocabulary reads only its rows"),
}

WINDOW_OPS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    **{k: ("l",) for k in ("conv1d", "max_pool1d", "avg_pool1d")},
    **{k: ("h", "w") for k in ("conv2d", "max_pool2d", "avg_pool2d")},
    **{k: ("d", "h", "w") for k in ("max_pool3d", "avg_pool3d")},
})


def _uncounted_padding(analysis, attrs, dim) -> bool:
    """avg_pool's count_include_pad=False with padding: a window's divisor counts the whole
    tensor's padding, which a shard padded by hand cannot tell from its halo."""
    return (not attrs.get("count_include_pad", True) and dim in WINDOW_OPS[analysis.desc.op_name]
            and any(_ints(attrs.get("padding", 0))))


def _ints(value) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _window_position(kind: str) -> Picks:
    return lambda analysis, attrs, dim: dim in WINDOW_OPS[kind]


_WINDOWS = {k: (SplitRule(_uncounted_padding, None, "count_include_pad=False divides each window by "
                                                     "its count inside the whole tensor's padding"),
                SplitRule(_window_position(k), "window", HALO)) for k in WINDOW_OPS}

_CLASSES = SplitRule(_reduction, None, "a shard of the classes would need the whole "
                                      "log-sum-exp and the class weights of its targets")


def _dropped_attention(analysis, attrs, dim) -> bool:
    return bool(attrs.get("dropout_p")) and dim in ("b", "h", "i")


SPLIT_RULES: Mapping[str, tuple[SplitRule, ...]] = MappingProxyType({
    **{k: (SplitRule(p, None, r), *_WINDOWS.get(k, ())) for k, (p, r) in _REFUSED.items()},
    **{k: (SplitRule(p, a, r),) for k, (p, a, r) in _ADAPTED.items()},
    "scaled_dot_product_attention": (
        SplitRule(_reduction, None, "a shard of keys normalizes by its own softmax denominator, not by "
                                    "the one over all keys"),
        SplitRule(_dropped_attention, "attention_positions", "its dropout mask depends on each attention "
                                                              "weight's global position")),
    **{k: (SplitRule(_position, "positions_loss", GLOBAL_COUNT), _CLASSES) for k in ("cross_entropy", "nll_loss")},
})


def split_rule(analysis, kind: str, attrs: Mapping[str, Any], dim: str) -> SplitRule | None:
    """The rule for splitting `dim` of an op of `kind`, or None when the kernel runs on a shard."""
    for rule in SPLIT_RULES.get(kind, ()):
        if rule.picks(analysis, attrs, dim):
            return rule
    return None


def adapter_of(analysis, config: Configuration) -> str | None:
    """The adapter the runtime runs this configuration through (None: the plain kernel)."""
    for dim in config.degrees:
        rule = split_rule(analysis, analysis.desc.op_name, analysis.desc.attrs, dim)
        if rule is not None and rule.adapter is not None:
            return rule.adapter
    return None


def refusal(analysis, config: Configuration, num_devices: int) -> str | None:
    """Why the runtime cannot execute `config` for this op, or None when it can."""
    kind, attrs = analysis.desc.op_name, analysis.desc.attrs
    if config.devices != range(num_devices) and num_devices > 1:
        return (f"runs on devices {config.devices.start}..{config.devices.stop - 1} of {num_devices}; "
                "the runtime runs every op on all devices (no transfers between device sub-blocks)")
    for reason in (_split_refusal(analysis, kind, attrs, config), _layout_refusal(analysis, config)):
        if reason:
            return reason
    if kind == "opaque" and config.degrees and attrs.get("call") is None:
        return "an opaque op whose ATen call capture could not record cannot run on a shard"
    return None


def _split_refusal(analysis, kind: str, attrs: Mapping[str, Any], config: Configuration) -> str | None:
    adapters = set()
    for dim, k in config.degrees.items():
        size = analysis.dim(dim).size
        if size % k:
            return (f"dim {dim!r} of size {size} split {k} ways is uneven (DTensor's chunks and the "
                    "TDL's differ)")
        rule = split_rule(analysis, kind, attrs, dim)
        if rule is not None and rule.adapter is None:
            return f"splitting {kind} along {dim!r}: {rule.reason}"
        if rule is not None:
            adapters.add(rule.adapter)
    if len(adapters) > 1:
        return f"splits that need different adapters at once ({', '.join(sorted(adapters))})"
    return None


def _layout_refusal(analysis, config: Configuration) -> str | None:
    op_layout = layout(analysis, config)
    for i, per_axis in enumerate(op_layout.inputs):
        if None in per_axis:
            reason = _halo_refusal(analysis, config, i, per_axis)
            if reason:
                name = analysis.desc.inputs[i].name
                return f"input {name!r} would need an irregular region (a halo or strided chunk): {reason}"
    for p in op_layout.outputs:
        if isinstance(p, Partial) and p.reduce_op != "sum":
            return f"its output would be {p}; DTensor's backward treats a partial value as a sum"
    return None


def _halo_refusal(analysis, config: Configuration, index: int, placements) -> str | None:
    """None when input `index` reaches its irregular regions by a halo exchange the runtime runs."""
    if adapter_of(analysis, config) != "window" or index != 0:
        return "only a window's input (a convolution's or pooling's) is exchanged as a halo"
    lay = TensorLayout(config.first_device, config.mesh_shape, tuple(placements))
    found = halo_exchange(lay, input_boxes(analysis, config, index), tuple(analysis.input_shapes[index]))
    return found if isinstance(found, str) else None


__all__ = ["SPLIT_RULES", "SplitRule", "adapter_of", "refusal", "split_rule"]
