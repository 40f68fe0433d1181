"""Reshapes, copies, joins, slices (and split pieces), padding, gathers, tensors made from
attributes. Shapes with -1 are resolved from the node's own output shape (meta['val'])."""

from __future__ import annotations

import math

from stratagem.frontend.aten.common import Converted, bind, dtype_name, ints, one, shape


def _reshape(node):
    return one("reshape", [node.args[0]], shape=shape(node))


def _expand(node):
    return one("expand", [node.args[0]], size=shape(node))


def _copy(node):
    return one("clone", [node.args[0]])


def _to_copy(node):
    args = bind(node)
    source, target = dtype_name(args["self"]), dtype_name(node)
    if source == target:
        return one("clone", [args["self"]])
    return one("to_copy", [args["self"]], dtype=target)


def _pieces(node, sizes, dim):
    """One slice per piece of a split along dim, producing element i of the node's list."""
    x = node.args[0]
    out, start = [], 0
    for i, length in enumerate(sizes):
        attrs = {"dim": dim, "start": start, "end": start + length, "step": 1}
        out.append(Converted("slice", (x,), attrs, i))
        start += length
    return out


def _split(node):
    args = bind(node)
    x, dim = args["self"], args["dim"]
    size = shape(x)[dim]
    if "split_size" in args:
        step = int(args["split_size"])
        sizes = [min(step, size - s) for s in range(0, size, step)]
    elif "split_sizes" in args:
        sizes = ints(args["split_sizes"])
    else:
        step = math.ceil(size / args["chunks"])
        sizes = [min(step, size - s) for s in range(0, size, step)]
    return _pieces(node, sizes, dim)


def _unbind(node):
    args = bind(node)
    x, dim = args["self"], args["dim"]
    return [Converted("select", (x,), {"dim": dim, "index": i}, i) for i in range(shape(x)[dim])]


def _broadcast_tensors(node):
    """Each tensor expanded to the common shape, producing element i of the node's list."""
    tensors = list(node.args[0])
    common = tuple(int(s) for s in node.meta["val"][0].shape)
    return [Converted("expand", (t,), {"size": common}, i) for i, t in enumerate(tensors)]


def _slice(node):
    args = bind(node)
    end = args["end"]
    size = shape(args["self"])[args["dim"]]
    return one("slice", [args["self"]], dim=args["dim"], start=args["start"],
               end=None if end is None or end >= size else end, step=args["step"])


PAD_MODES = {"reflect": "reflection_pad", "replicate": "replication_pad"}


def _pad(node):
    args = bind(node)
    mode = args.get("mode", "constant")
    if mode in PAD_MODES:
        return one(PAD_MODES[mode], [args["self"]], pad=ints(args["pad"]))
    if mode != "constant":
        return None
    value = args.get("value")
    return one("pad", [args["self"]], pad=ints(args["pad"]), value=float(value or 0.0))


def _edge_pad(kind):
    return lambda node: one(kind, [node.args[0]], pad=ints(bind(node)["padding"]))


def _as_strided(node):
    args = bind(node)
    source = args["self"].meta["val"]
    if not source.is_contiguous() or source.storage_offset() != 0:
        return None                         # the description assumes a row-major storage of x
    return one("as_strided", [args["self"]], size=shape(node), stride=ints(args["stride"]),
               storage_offset=int(args["storage_offset"] or 0))


def _slice_scatter(node):
    args = bind(node)
    if args["step"] != 1:
        return None
    size = shape(args["self"])[args["dim"]]
    end = args["end"]
    return one("slice_scatter", [args["self"], args["src"]], dim=args["dim"], start=args["start"],
               end=None if end is None or end >= size else end)


def _copy_into(node):
    """copy(self, src): src broadcast to self's shape (self's values are not read)."""
    args = bind(node)
    if dtype_name(args["src"]) != dtype_name(node):
        return None
    if shape(args["src"]) == shape(node):
        return one("clone", [args["src"]])
    return one("expand", [args["src"]], size=shape(node))


def _empty(node):
    """empty's values are unspecified; zeros are one valid choice."""
    return one("zeros", [], size=shape(node))


def _repeat_interleave(node):
    args = bind(node)
    if not isinstance(args["repeats"], int):
        return None
    return one("repeat_interleave", [args["self"]], repeats=args["repeats"], dim=args["dim"])


def _index(node):
    """x[..., idx, ...] with one index tensor on one dim: index_select (others are not described)."""
    args = bind(node)
    x, indices = args["self"], list(args["indices"])
    used = [d for d, i in enumerate(indices) if i is not None]
    if len(used) != 1 or len(shape(indices[used[0]])) != 1 or dtype_name(indices[used[0]]) == "bool":
        return None
    return one("index_select", [x, indices[used[0]]], dim=used[0])


def _unflatten(node):
    args = bind(node)
    dim = args["dim"] % len(shape(args["self"]))
    return one("unflatten", [args["self"]], dim=dim, sizes=shape(node)[dim:dim + len(args["sizes"])])


def _filled(kind):
    def convert(node):
        args = bind(node)
        extra = {"fill_value": args["fill_value"]} if "fill_value" in args else {}
        return one(kind, [], size=shape(node), **extra)
    return convert


def _like(kind):
    def convert(node):
        args = bind(node)
        extra = {"fill_value": args["fill_value"]} if kind == "full_like" else {}
        return one(kind, [args["self"]], **extra)
    return convert


def _arange(node):
    args = bind(node)
    return one("arange", [], start=args.get("start", 0), end=args["end"], step=args.get("step", 1))


CONVERTERS = {
    "aten.view.default": _reshape, "aten.reshape.default": _reshape, "aten._unsafe_view.default": _reshape,
    "aten.view_copy.default": _reshape,
    "aten.flatten.using_ints": lambda node: one("flatten", [node.args[0]], start_dim=bind(node)["start_dim"],
                                                end_dim=bind(node)["end_dim"]),
    "aten.unflatten.int": _unflatten,
    "aten.unsqueeze.default": lambda node: one("unsqueeze", [node.args[0]], dim=bind(node)["dim"]),
    "aten.squeeze.dim": lambda node: one("squeeze", [node.args[0]], dim=bind(node)["dim"]),
    "aten.squeeze.dims": lambda node: one("squeeze", [node.args[0]], dim=ints(bind(node)["dim"])),
    "aten.squeeze.default": lambda node: one("squeeze", [node.args[0]], dim=None),
    "aten.expand.default": _expand,
    "aten.broadcast_tensors.default": _broadcast_tensors,
    "aten.transpose.int": lambda node: one("transpose", [node.args[0]], dim0=bind(node)["dim0"],
                                           dim1=bind(node)["dim1"]),
    "aten.permute.default": lambda node: one("permute", [node.args[0]], dims=ints(bind(node)["dims"])),
    "aten.contiguous.default": lambda node: one("contiguous", [node.args[0]]),
    "aten.clone.default": _copy, "aten.alias.default": _copy, "aten.detach.default": _copy,
    "aten.lift_fresh_copy.default": _copy,
    "aten._to_copy.default": _to_copy, "aten.to.dtype": _to_copy, "aten.to.dtype_layout": _to_copy,
    "aten.cat.default": lambda node: one("cat", list(node.args[0]), dim=bind(node)["dim"]),
    "aten.stack.default": lambda node: one("stack", list(node.args[0]), dim=bind(node)["dim"]),
    "aten.slice.Tensor": _slice,
    "aten.select.int": lambda node: one("select", [node.args[0]], dim=bind(node)["dim"],
                                        index=bind(node)["index"]),
    "aten.narrow.default": lambda node: one("narrow", [node.args[0]], dim=bind(node)["dim"],
                                            start=bind(node)["start"], length=bind(node)["length"]),
    "aten.split.Tensor": _split, "aten.split_with_sizes.default": _split, "aten.chunk.default": _split,
    "aten.unbind.int": _unbind,
    "aten.constant_pad_nd.default": _pad, "aten.pad.default": _pad,
    **{f"aten.reflection_pad{n}d.default": _edge_pad("reflection_pad") for n in (1, 2, 3)},
    **{f"aten.replication_pad{n}d.default": _edge_pad("replication_pad") for n in (1, 2, 3)},
    "aten.diagonal.default": lambda node: one("diagonal", [node.args[0]], offset=bind(node)["offset"],
                                              dim1=bind(node)["dim1"], dim2=bind(node)["dim2"]),
    "aten.as_strided.default": _as_strided,
    "aten.scatter_add.default": lambda node: one(
        "scatter_add", [bind(node)[k] for k in ("self", "index", "src")], dim=bind(node)["dim"]),
    "aten.slice_scatter.default": _slice_scatter,
    "aten.select_scatter.default": lambda node: one("select_scatter", [bind(node)["self"], bind(node)["src"]],
                                                    dim=bind(node)["dim"], index=bind(node)["index"]),
    "aten.fill.Scalar": lambda node: one("full_like", [node.args[0]], fill_value=bind(node)["value"]),
    "aten.copy.default": _copy_into,
    "aten.empty.memory_format": _empty, "aten.empty_strided.default": _empty,
    "aten.empty_like.default": _empty,
    "aten.triu.default": lambda node: one("triu", [node.args[0]], diagonal=bind(node)["diagonal"]),
    "aten.tril.default": lambda node: one("tril", [node.args[0]], diagonal=bind(node)["diagonal"]),
    "aten.flip.default": lambda node: one("flip", [node.args[0]], dims=ints(bind(node)["dims"])),
    "aten.roll.default": lambda node: (one("roll", [node.args[0]], shifts=ints(bind(node)["shifts"]),
                                           dims=ints(bind(node)["dims"])) if bind(node)["dims"] else None),
    "aten.repeat.default": lambda node: one("repeat", [node.args[0]], repeats=ints(bind(node)["repeats"])),
    "aten.repeat_interleave.self_int": _repeat_interleave,
    "aten.index_select.default": lambda node: one("index_select", [bind(node)["self"], bind(node)["index"]],
                                                  dim=bind(node)["dim"]),
    "aten.gather.default": lambda node: one("gather", [bind(node)["self"], bind(node)["index"]],
                                            dim=bind(node)["dim"]),
    "aten.index.Tensor": _index,
    "aten.zeros.default": _filled("zeros"), "aten.ones.default": _filled("ones"),
    "aten.full.default": _filled("full"), "aten.new_zeros.default": _filled("zeros"),
    "aten.new_ones.default": _filled("ones"), "aten.new_full.default": _filled("full"),
    "aten.scalar_tensor.default": lambda node: one("full", [], size=(), fill_value=bind(node)["s"]),
    "aten.zeros_like.default": _like("zeros_like"), "aten.ones_like.default": _like("ones_like"),
    "aten.full_like.default": _like("full_like"),
    "aten.arange.default": _arange, "aten.arange.start": _arange, "aten.arange.start_step": _arange,
}
