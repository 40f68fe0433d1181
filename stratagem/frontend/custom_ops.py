"""PyTorch custom ops that export keeps whole, for layers the zoo wants planned as one op.

`stratagem::gated_lstm_cell` is an LSTM step with gate-major weights ([4, H, I] rather than
nn.LSTMCell's interleaved [4H, I]), so its hidden units can be split across devices with every
weight sharded along dim 1 (TDL op `gated_lstm_cell`). Forward and backward are those of
`gated_lstm_cell_reference`, plain differentiable torch.
"""

from __future__ import annotations

import torch
from torch import Tensor


def gated_lstm_cell_reference(x: Tensor, hx: Tensor, cx: Tensor, w_ih: Tensor, w_hh: Tensor,
                              b_ih: Tensor | None = None, b_hh: Tensor | None = None
                              ) -> tuple[Tensor, Tensor]:
    """Gates in nn.LSTMCell's order (input, forget, cell, output), each [B, H]."""
    gates = torch.einsum("bk,ghk->gbh", x, w_ih) + torch.einsum("bk,ghk->gbh", hx, w_hh)
    if b_ih is not None:
        gates = gates + b_ih[:, None, :]
    if b_hh is not None:
        gates = gates + b_hh[:, None, :]
    i, f, g, o = gates.unbind(0)
    c = torch.sigmoid(f) * cx + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


@torch.library.custom_op("stratagem::gated_lstm_cell", mutates_args=())
def gated_lstm_cell(x: Tensor, hx: Tensor, cx: Tensor, w_ih: Tensor, w_hh: Tensor,
                    b_ih: Tensor | None, b_hh: Tensor | None) -> tuple[Tensor, Tensor]:
    h, c = gated_lstm_cell_reference(x, hx, cx, w_ih, w_hh, b_ih, b_hh)
    return h.clone(), c.clone()


@gated_lstm_cell.register_fake
def _(x, hx, cx, w_ih, w_hh, b_ih, b_hh):
    return hx.new_empty(hx.shape), cx.new_empty(cx.shape)


def _setup_context(ctx, inputs, output) -> None:
    ctx.has_bias = (inputs[5] is not None, inputs[6] is not None)
    ctx.save_for_backward(*[t for t in inputs if t is not None])


def _backward(ctx, grad_h: Tensor, grad_c: Tensor):
    saved = list(ctx.saved_tensors)
    x, hx, cx, w_ih, w_hh = saved[:5]
    rest = iter(saved[5:])
    b_ih = next(rest) if ctx.has_bias[0] else None
    b_hh = next(rest) if ctx.has_bias[1] else None
    inputs = [t.detach().requires_grad_(True) if t is not None else None
              for t in (x, hx, cx, w_ih, w_hh, b_ih, b_hh)]
    with torch.enable_grad():
        h, c = gated_lstm_cell_reference(*inputs)
        present = [t for t in inputs if t is not None]
        grads = iter(torch.autograd.grad((h, c), present, (grad_h, grad_c), allow_unused=True))
    return tuple(next(grads) if t is not None else None for t in inputs)


gated_lstm_cell.register_autograd(_backward, setup_context=_setup_context)
