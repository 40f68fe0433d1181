"""Softmax, embedding, attention, LSTM cell, dropout, losses."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from stratagem.frontend.torch_impl.common import optional
from stratagem.frontend.torch_impl.rng import dropout_keep


def _attention(inputs, attrs, out_shape):
    q, k, v = inputs[:3]
    mask = optional(inputs, 3)
    if mask is not None and attrs["mask_is_bool"]:
        mask = mask.bool()
    if attrs.get("dropout_p"):
        keep = dropout_keep((*q.shape[:3], k.shape[2]), attrs["dropout_p"], attrs["seed"], q.device)
        return attention_with_keep(q, k, v, mask, attrs, keep)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0,
                                          is_causal=attrs["is_causal"], scale=attrs["scale"],
                                          enable_gqa=attrs["enable_gqa"])


def attention_with_keep(q, k, v, mask, attrs, keep: torch.Tensor) -> torch.Tensor:
    """Attention whose weights are dropped where `keep` [B, H, L, S] is False and scaled by
    1 / (1 - dropout_p) elsewhere (the TDL's counter-based mask, given by the caller)."""
    if mask is not None and attrs["mask_is_bool"]:
        mask = mask.bool()
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    scale = attrs["scale"] if attrs["scale"] is not None else 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ k.transpose(-2, -1)) * scale
    if attrs["is_causal"]:
        causal = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    weights = torch.softmax(scores, dim=-1)
    kept = torch.where(keep, weights * (1.0 / (1.0 - attrs["dropout_p"])), torch.zeros((), dtype=weights.dtype,
                                                                                      device=weights.device))
    return kept @ v


def _lstm_cell(inputs, attrs, out_shape):
    x, hx, cx, w_ih, w_hh = inputs[:5]
    hy, cy = torch.ops.aten.lstm_cell(x, [hx, cx], w_ih, w_hh, optional(inputs, 5), optional(inputs, 6))
    return hy, cy


def _gated_lstm_cell(inputs, attrs, out_shape):
    from stratagem.frontend.custom_ops import gated_lstm_cell_reference
    return gated_lstm_cell_reference(*inputs[:5], optional(inputs, 5), optional(inputs, 6))


def _dropout(inputs, attrs, out_shape):
    """The TDL's dropout: the mask is a function of the element's position in the whole tensor,
    so this runs on whole tensors only (a shard would need its global offset)."""
    x, p = inputs[0], attrs["p"]
    if not attrs["train"] or p == 0:
        return x.clone()
    keep = dropout_keep(x.shape, p, attrs["seed"], x.device)
    return torch.where(keep, x * (1.0 / (1.0 - p)), torch.zeros((), dtype=x.dtype, device=x.device))


def _cross_entropy(inputs, attrs, out_shape):
    return F.cross_entropy(inputs[0], inputs[1].long(), optional(inputs, 2),
                           ignore_index=attrs["ignore_index"], reduction=attrs["reduction"],
                           label_smoothing=attrs["label_smoothing"])


def _nll_loss(inputs, attrs, out_shape):
    return F.nll_loss(inputs[0], inputs[1].long(), optional(inputs, 2),
                      ignore_index=attrs["ignore_index"], reduction=attrs["reduction"])


IMPLS = {
    "softmax": lambda inputs, attrs, out_shape: torch.softmax(inputs[0], attrs["dim"]),
    "log_softmax": lambda inputs, attrs, out_shape: torch.log_softmax(inputs[0], attrs["dim"]),
    "embedding": lambda inputs, attrs, out_shape: F.embedding(inputs[0].long(), inputs[1]),
    "scaled_dot_product_attention": _attention,
    "lstm_cell": _lstm_cell,
    "gated_lstm_cell": _gated_lstm_cell,
    "dropout": _dropout,
    "cross_entropy": _cross_entropy,
    "nll_loss": _nll_loss,
    "mse_loss": lambda inputs, attrs, out_shape: F.mse_loss(inputs[0], inputs[1],
                                                            reduction=attrs["reduction"]),
}
