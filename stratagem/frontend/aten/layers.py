"""Matrix products, convolution, pooling, normalization, attention, LSTM cell, losses, dropout."""

from __future__ import annotations

import torch

from stratagem.frontend.aten.common import (
    Converted, Intermediate, bind, dtype_name, is_floating, ints, one, other_elements_used,
    seed_of, shape,
)
from stratagem.tdl.library.common import numel

REDUCTION = {0: "none", 1: "mean", 2: "sum"}


def _addmm(kind):
    def convert(node):
        args = bind(node)
        first, second = ("mat1", "mat2") if kind == "addmm" else ("batch1", "batch2")
        return one(kind, [args[first], args[second], args["self"]], beta=args["beta"], alpha=args["alpha"])
    return convert


def _t(node):
    x = node.args[0]
    return one("transpose", [x], dim0=0, dim1=1) if len(shape(x)) == 2 else one("clone", [x])


# ---- convolution and pooling ---------------------------------------------------------------

def _same_padding(weight, dilation):
    pads = []
    for k, d in zip(shape(weight)[2:], dilation):
        total = d * (k - 1)
        if total % 2:
            return None               # asymmetric 'same' padding: a pad op would be needed
        pads.append(total // 2)
    return tuple(pads)


def _conv(node):
    args = bind(node)
    x, weight = args["input"], args["weight"]
    n = len(shape(weight)) - 2
    if args.get("transposed") or n not in (1, 2) or len(shape(x)) != n + 2:
        return None
    padding = args["padding"]
    dilation = ints(args["dilation"]) * (n if len(ints(args["dilation"])) == 1 else 1)
    if isinstance(padding, str):
        padding = (0,) * n if padding == "valid" else _same_padding(weight, dilation)
        if padding is None:
            return None
    return one(f"conv{n}d", [x, weight, args["bias"]], stride=ints(args["stride"]),
               padding=ints(padding), dilation=dilation, groups=args["groups"])


def _max_pool(n):
    def convert(node):
        if other_elements_used(node, [0]):
            return None                                   # indices of the maxima are not described
        args = bind(node)
        return one(f"max_pool{n}d", [args["self"]], kernel_size=ints(args["kernel_size"]),
                   stride=ints(args["stride"]) if args["stride"] else None, padding=ints(args["padding"]),
                   dilation=ints(args["dilation"]), ceil_mode=args["ceil_mode"])
    return convert


def _avg_pool(n):
    def convert(node):
        args = bind(node)
        if args["ceil_mode"]:
            return None
        extra = {"divisor_override": args["divisor_override"]} if n > 1 else {}
        return one(f"avg_pool{n}d", [args["self"]], kernel_size=ints(args["kernel_size"]),
                   stride=ints(args["stride"]) if args["stride"] else None, padding=ints(args["padding"]),
                   count_include_pad=args["count_include_pad"], **extra)
    return convert


def _adaptive(n):
    def convert(node):
        args = bind(node)
        x, out = args["self"], ints(args["output_size"])
        if any(s % o for s, o in zip(shape(x)[-n:], out)):
            return None
        return one(f"adaptive_avg_pool{n}d", [x], output_size=out)
    return convert


def _upsample_nearest2d(node):
    args = bind(node)
    x = args["input"]
    factors = [o // i for o, i in zip(shape(node)[-2:], shape(x)[-2:])]
    if any(o != i * f for o, i, f in zip(shape(node)[-2:], shape(x)[-2:], factors)) or len(shape(x)) != 4:
        return None
    return one("upsample_nearest2d", [x], scale_factor=tuple(factors))


# ---- normalization ----------------------------------------------------------------------------

def _layer_norm(node):
    args = bind(node)
    if other_elements_used(node, [0]):
        return None
    return one("layer_norm", [args["input"], args["weight"], args["bias"]],
               normalized_shape=ints(args["normalized_shape"]), eps=args["eps"])


def _rms_norm(node):
    args = bind(node)
    x, eps = args["input"], args["eps"]
    if eps is None:
        eps = float(torch.finfo(x.meta["val"].dtype).eps)
    return one("rms_norm", [x, args["weight"]], normalized_shape=ints(args["normalized_shape"]), eps=eps)


def _group_norm(node):
    args = bind(node)
    if other_elements_used(node, [0]):
        return None
    groups = args["num_groups"] if "num_groups" in args else args["group"]
    return one("group_norm", [args["input"], args["weight"], args["bias"]], num_groups=groups,
               eps=args["eps"])


def batch_norm_training(x, weight, bias, eps, running=(None, None), momentum=None):
    """Training batch norm as statistics (P(sum) under a batch split) and their application; with
    running statistics, their next values too (frontend/state.py carries them as state)."""
    sizes = shape(x)
    count = numel(sizes) // sizes[1]
    apply = one("batch_norm_apply", [x, Intermediate(0), weight, bias], eps=eps, count=count)
    if apply is None:
        return None
    updates = [Converted("batch_norm_running", (Intermediate(0), buffer), {"which": which, "momentum": momentum,
                                                                           "count": count}, None, buffer)
               for which, buffer in enumerate(running) if buffer is not None]
    if updates and (momentum is None or count < 2):
        return None          # a cumulative average, or no unbiased variance: left opaque, then refused
    return [Converted("batch_norm_stats", (x,), {}, None), *apply, *updates]


def _batch_norm(node):
    args = bind(node)
    if other_elements_used(node, [0]):
        return None
    x, weight, bias = args["input"], args["weight"], args["bias"]
    mean, var = args.get("running_mean"), args.get("running_var")
    if args.get("training", False) or mean is None:
        return batch_norm_training(x, weight, bias, args["eps"], (mean, var), args.get("momentum"))
    return one("batch_norm", [x, mean, var, weight, bias], eps=args["eps"])


# ---- reductions ---------------------------------------------------------------------------------

def _dims(value):
    if value is None:
        return None
    dims = ints(value)
    return dims or None


def _reduce(kind):
    def convert(node):
        args = bind(node)
        return one(kind, [args["self"]], dim=_dims(args.get("dim")), keepdim=bool(args.get("keepdim", False)))
    return convert


def _variance(kind):
    def convert(node):
        args = bind(node)
        if "unbiased" in args:
            correction = 1 if args["unbiased"] else 0
        else:
            correction = 1 if args["correction"] is None else args["correction"]
        return one(kind, [args["self"]], dim=_dims(args["dim"]), correction=correction,
                   keepdim=bool(args["keepdim"]))
    return convert


def _arg(kind):
    def convert(node):
        args = bind(node)
        return one(kind, [args["self"]], dim=args["dim"], keepdim=bool(args["keepdim"]))
    return convert


def _extreme_dim(kind):
    def convert(node):
        args = bind(node)
        return one(kind, [args["self"]], dim=args["dim"], keepdim=bool(args["keepdim"]))
    return convert


def _softmax(kind):
    def convert(node):
        args = bind(node)
        return one(kind, [args["self"]], dim=args["dim"])
    return convert


# ---- nn layers ------------------------------------------------------------------------------------

def _embedding(node):
    args = bind(node)
    return one("embedding", [args["indices"], args["weight"]])


def _attention(node):
    """Dropout on the attention weights becomes the TDL's counter-based mask (its own per-node seed)."""
    args = bind(node)
    mask = args["attn_mask"]
    mask_is_bool = mask is not None and dtype_name(mask) == "bool"
    dropout = {"dropout_p": float(args["dropout_p"]), "seed": seed_of(node)} if args["dropout_p"] else {}
    return one("scaled_dot_product_attention", [args["query"], args["key"], args["value"], mask],
               is_causal=bool(args["is_causal"]), scale=args["scale"],
               enable_gqa=bool(args["enable_gqa"]), mask_is_bool=mask_is_bool, **dropout)


def _lstm_cell(node):
    args = bind(node)
    hx, cx = args["hx"]
    return one("lstm_cell", [args["input"], hx, cx, args["w_ih"], args["w_hh"], args["b_ih"], args["b_hh"]])


def _gated_lstm_cell(node):
    args = bind(node)
    return one("gated_lstm_cell", [args["x"], args["hx"], args["cx"], args["w_ih"], args["w_hh"],
                                   args["b_ih"], args["b_hh"]])


def _cross_entropy(node):
    args = bind(node)
    if is_floating(args["target"]):
        return None                                     # class probabilities are not described
    return one("cross_entropy", [args["self"], args["target"], args["weight"]],
               reduction=REDUCTION[args["reduction"]], ignore_index=args["ignore_index"],
               label_smoothing=args["label_smoothing"])


def _nll_loss(node):
    args = bind(node)
    if other_elements_used(node, [0]):
        return None
    return one("nll_loss", [args["self"], args["target"], args["weight"]],
               reduction=REDUCTION[args["reduction"]], ignore_index=args["ignore_index"])


def _mse_loss(node):
    args = bind(node)
    if shape(args["self"]) != shape(args["target"]):
        return None
    return one("mse_loss", [args["self"], args["target"]], reduction=REDUCTION[args["reduction"]])


def _dropout(node):
    args = bind(node)
    if other_elements_used(node, [0]):
        return None                                     # native_dropout's mask output
    train = True if args["train"] is None else bool(args["train"])
    return one("dropout", [args["input"]], p=float(args["p"]), train=train, seed=seed_of(node))


CONVERTERS = {
    "aten.mm.default": lambda node: one("mm", node.args[:2]),
    "aten.bmm.default": lambda node: one("bmm", node.args[:2]),
    "aten.matmul.default": lambda node: one("matmul", node.args[:2]),
    "aten.linear.default": lambda node: one("linear", [bind(node)[k] for k in ("input", "weight", "bias")]),
    "aten.addmm.default": _addmm("addmm"),
    "aten.baddbmm.default": _addmm("baddbmm"),
    "aten.t.default": _t,
    "aten.conv1d.default": _conv, "aten.conv2d.default": _conv,
    "aten.conv1d.padding": _conv, "aten.conv2d.padding": _conv,
    "aten.convolution.default": _conv,
    "aten.max_pool1d.default": _max_pool(1), "aten.max_pool2d.default": _max_pool(2),
    "aten.max_pool2d_with_indices.default": _max_pool(2),
    "aten.max_pool3d.default": _max_pool(3), "aten.max_pool3d_with_indices.default": _max_pool(3),
    "aten.avg_pool3d.default": _avg_pool(3),
    "aten.adaptive_avg_pool3d.default": _adaptive(3), "aten._adaptive_avg_pool3d.default": _adaptive(3),
    "aten.avg_pool1d.default": _avg_pool(1), "aten.avg_pool2d.default": _avg_pool(2),
    "aten.adaptive_avg_pool1d.default": _adaptive(1), "aten.adaptive_avg_pool2d.default": _adaptive(2),
    "aten._adaptive_avg_pool2d.default": _adaptive(2),
    "aten.upsample_nearest2d.vec": _upsample_nearest2d,
    "aten.upsample_nearest2d.default": _upsample_nearest2d,
    "aten.layer_norm.default": _layer_norm, "aten.native_layer_norm.default": _layer_norm,
    "aten.rms_norm.default": _rms_norm,
    "aten.group_norm.default": _group_norm, "aten.native_group_norm.default": _group_norm,
    "aten.batch_norm.default": _batch_norm,
    "aten._native_batch_norm_legit.default": _batch_norm,
    "aten._native_batch_norm_legit.no_stats": _batch_norm,
    "aten._native_batch_norm_legit_no_training.default": _batch_norm,
    "aten._native_batch_norm_legit_functional.default": _batch_norm,
    "aten.sum.dim_IntList": _reduce("sum"), "aten.sum.default": _reduce("sum"),
    "aten.mean.dim": _reduce("mean"), "aten.mean.default": _reduce("mean"),
    "aten.amax.default": _reduce("amax"), "aten.amin.default": _reduce("amin"),
    "aten.max.default": _reduce("amax"), "aten.min.default": _reduce("amin"),
    "aten.prod.default": _reduce("prod"), "aten.prod.dim_int": _reduce("prod"),
    "aten.any.default": _reduce("any"), "aten.any.dim": _reduce("any"), "aten.any.dims": _reduce("any"),
    "aten.all.default": _reduce("all"), "aten.all.dim": _reduce("all"), "aten.all.dims": _reduce("all"),
    "aten.logsumexp.default": _reduce("logsumexp"),
    "aten.var.correction": _variance("var"), "aten.var.dim": _variance("var"),
    "aten.std.correction": _variance("std"), "aten.std.dim": _variance("std"),
    "aten.argmax.default": _arg("argmax"), "aten.argmin.default": _arg("argmin"),
    "aten.max.dim": _extreme_dim("max_dim"), "aten.min.dim": _extreme_dim("min_dim"),
    "aten.cumsum.default": lambda node: one("cumsum", [node.args[0]], dim=bind(node)["dim"]),
    "aten.softmax.int": _softmax("softmax"), "aten._softmax.default": _softmax("softmax"),
    "aten.log_softmax.int": _softmax("log_softmax"), "aten._log_softmax.default": _softmax("log_softmax"),
    "aten.embedding.default": _embedding,
    "aten.scaled_dot_product_attention.default": _attention,
    "aten.lstm_cell.default": _lstm_cell,
    "stratagem.gated_lstm_cell.default": _gated_lstm_cell,
    "aten.cross_entropy_loss.default": _cross_entropy,
    "aten.nll_loss.default": _nll_loss, "aten.nll_loss_nd.default": _nll_loss,
    "aten.nll_loss_forward.default": _nll_loss,
    "aten.mse_loss.default": _mse_loss,
    "aten.dropout.default": _dropout, "aten.native_dropout.default": _dropout,
}
