"""Neural-network layers: softmax, embedding, attention, LSTM cell, dropout.

Gathers by a data value (embedding) are written as one-hot sums over the gathered dim, so that
splitting the vocabulary is a reduction split: vocab-parallel embedding, P(sum). Their FLOPs
are declared (`flops=`): the one-hot sum would count V multiply-adds per output element.
"""

from __future__ import annotations

import math

from stratagem.errors import TDLError
from stratagem.tdl.expr import Compute, IndexValue, Max, Sum, exp, log, sigmoid, tanh, uniform, where
from stratagem.tdl.library.common import NEG_INF, axis, broadcast_index, names, numel, with_index
from stratagem.tdl.rng import dropout_counter
from stratagem.tdl.trace import op


def _along(x, a, idx, name):
    """Max, Sum(exp(x - max)) along dim a at output index idx (softmax's two reductions)."""
    def at(r):
        return x[with_index(idx, a, r)]
    m = Max(Compute([name], at))
    return m, Sum(Compute([name], lambda r: exp(at(r) - m)))


@op(saves="output", example=(([4, 6],), {"dim": -1}))
def softmax(x, *, dim):
    """exp(x - max) / Sum(exp(x - max)) along dim."""
    a = axis(dim, x.ndim, "softmax")

    def body(*idx):
        m, total = _along(x, a, idx, f"r{a}")
        return exp(x[idx] - m) / total

    return Compute(names("d", range(x.ndim)), body)


@op(saves="output", example=(([4, 6],), {"dim": -1}))
def log_softmax(x, *, dim):
    """x - max - log(Sum(exp(x - max))) along dim."""
    a = axis(dim, x.ndim, "log_softmax")

    def body(*idx):
        m, total = _along(x, a, idx, f"r{a}")
        return x[idx] - m - log(total)

    return Compute(names("d", range(x.ndim)), body)


def _embedding_flops(dims, input_shapes, **_):
    return float(numel([n for name, n in dims.items() if name != "v"]))


@op(weights=("weight",), saves="nothing", flops=_embedding_flops, example=([4, 5], [10, 6]))
def embedding(indices, weight, *, padding_idx=None):
    """weight[indices[...], d] as Sum(v: where(indices == v, weight[v, d], 0)); padding_idx only
    affects the gradient."""
    if weight.ndim != 2:
        raise TDLError("op 'embedding' needs a [V, D] table", got=str(list(weight.shape)))

    def body(*idx):
        *pos, d = idx
        return Sum(lambda v: where(indices[tuple(pos)] == v, weight[v, d], 0.0))

    return Compute([*names("b", range(indices.ndim)), "d"], body)


def _attention_flops(dims, input_shapes, **_):
    """QK^T over all keys, softmax, and the weighted sum of the worker's keys."""
    (_, _, _, e), (_, _, s, _) = input_shapes[0], input_shapes[1]
    rows = dims["b"] * dims["h"] * dims["i"]
    return float(rows * s * (2 * e + 3) + 2 * rows * dims["j"] * dims["d"])


def _attention_shapes(q, k, v, enable_gqa):
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise TDLError("op 'scaled_dot_product_attention' needs q [B, H, L, E], k [B, Hk, S, E], "
                       "v [B, Hk, S, Ev]", got=f"{list(q.shape)}, {list(k.shape)}, {list(v.shape)}")
    heads, kv_heads = q.shape[1], k.shape[1]
    if heads % kv_heads or (kv_heads != heads and not enable_gqa):
        raise TDLError("op 'scaled_dot_product_attention': query heads must equal key heads, or be "
                       "a multiple of them with enable_gqa=True", got=f"{heads} and {kv_heads}")
    return heads // kv_heads


@op(saves="inputs_and_output", fused_saves=True, output_like_input=True, flops=_attention_flops,
    matrix_engine=True,
    shape=lambda q, k, v, attn_mask=None, **_: (*q.shape[:3], v.shape[3]),
    example=(([2, 4, 5, 3], [2, 2, 6, 3], [2, 2, 6, 3]),
                                     {"is_causal": True, "enable_gqa": True}))
def scaled_dot_product_attention(q, k, v, attn_mask=None, *, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False, mask_is_bool=False, seed=0):
    """softmax(q k^T * scale + mask) v per (batch, head); key head h // (H / Hk) (GQA).

    is_causal keeps keys j <= i; attn_mask (broadcast to [B, H, L, S]) is added, or, with
    mask_is_bool, keeps the keys where it is nonzero. dropout_p drops attention weight (b, h, i, j)
    where uniform(seed, its row-major position in [B, H, L, S]) < dropout_p and scales the others by
    1 / (1 - dropout_p), as `dropout` does its elements: every split draws the same mask.
    """
    if not 0 <= dropout_p < 1:
        raise TDLError("op 'scaled_dot_product_attention': dropout_p must be in [0, 1)", got=repr(dropout_p))
    group = _attention_shapes(q, k, v, enable_gqa)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores_shape = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])

    def body(b, h, i, d):
        hk = h // group

        def score(j):
            s = Sum(lambda e: q[b, h, i, e] * k[b, hk, j, e], e=q.shape[3]) * scale
            if attn_mask is None:
                return s
            masked = attn_mask[broadcast_index(attn_mask.shape, (b, h, i, j), scores_shape)]
            return where(masked, s, NEG_INF) if mask_is_bool else s + masked

        def keep(j, value, dropped):
            return where(j - i <= 0, value, dropped) if is_causal else value

        def dropped(j, value):
            if not dropout_p:
                return value
            position = ((b * scores_shape[1] + h) * scores_shape[2] + i) * scores_shape[3] + j
            kept = uniform(IndexValue(position + dropout_counter(seed, 0))) >= dropout_p
            return where(kept, value * (1.0 / (1.0 - dropout_p)), 0.0)

        keys = k.shape[2]
        m = Max(lambda j: keep(j, score(j), NEG_INF), j=keys)
        numerator = Sum(lambda j: keep(j, dropped(j, exp(score(j) - m)) * v[b, hk, j, d], 0.0), j=keys)
        denominator = Sum(lambda j: keep(j, exp(score(j) - m), 0.0), j=keys)
        return numerator / denominator

    return Compute(["b", "h", "i", "d"], body)


@op(weights=("w_ih", "w_hh", "b_ih", "b_hh"), shape=lambda x, hx, cx, *weights: tuple(hx.shape),
    example=([3, 4], [3, 5], [3, 5], [20, 4], [20, 5], [20], [20]))
def lstm_cell(x, hx, cx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM step; gates (input, forget, cell, output) are rows g*H + j of the weights.

    Outputs (h', c') over the same (b, j): c' = f c + i g, h' = o tanh(c').
    """
    hidden = hx.shape[1]

    def gate(g, b, j):
        row = g * hidden + j
        out = Sum(lambda k: x[b, k] * w_ih[row, k]) + Sum(lambda kh: hx[b, kh] * w_hh[row, kh])
        if b_ih is not None:
            out = out + b_ih[row]
        return out if b_hh is None else out + b_hh[row]

    def cell(b, j):
        return sigmoid(gate(1, b, j)) * cx[b, j] + sigmoid(gate(0, b, j)) * tanh(gate(2, b, j))

    return (lambda b, j: sigmoid(gate(3, b, j)) * tanh(cell(b, j)),
            lambda b, j: cell(b, j))


@op(weights=("w_ih", "w_hh", "b_ih", "b_hh"), matrix_engine=True,
    example=([4, 6], [4, 5], [4, 5], [4, 5, 6], [4, 5, 5], [4, 5], [4, 5]))
def gated_lstm_cell(x, hx, cx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM step with gate-major weights w_ih[4, H, I], w_hh[4, H, H], biases [4, H].

    The same step as `lstm_cell`, but gate g of hidden unit j reads weight row (g, j) rather than
    row g*H + j, so splitting the hidden units j splits every weight along its dim 1: exact,
    and a DTensor placement (S(1)). `lstm_cell`'s interleaved rows cannot be split that way.
    """
    def gate(g, b, j):
        out = Sum(lambda k: x[b, k] * w_ih[g, j, k]) + Sum(lambda kh: hx[b, kh] * w_hh[g, j, kh])
        if b_ih is not None:
            out = out + b_ih[g, j]
        return out if b_hh is None else out + b_hh[g, j]

    def cell(b, j):
        return sigmoid(gate(1, b, j)) * cx[b, j] + sigmoid(gate(0, b, j)) * tanh(gate(2, b, j))

    return (lambda b, j: sigmoid(gate(3, b, j)) * tanh(cell(b, j)),
            lambda b, j: cell(b, j))


@op(saves="nothing", follows=True, example=(([4, 6],), {"p": 0.25, "train": True}))
def dropout(x, *, p=0.5, train=False, seed=0):
    """x / (1 - p) where uniform(seed, position) >= p, else 0; x itself when not training.

    The mask is a fixed function of each element's row-major position (tdl.rng), so every split
    draws the same mask.
    """
    if not train or p == 0:
        return Compute(names("d", range(x.ndim)), lambda *idx: x[idx])
    if not 0 <= p < 1:
        raise TDLError("op 'dropout': p must be in [0, 1)", got=repr(p))

    def body(*idx):
        position = sum(i * numel(x.shape[d + 1:]) for d, i in enumerate(idx))
        counter = IndexValue(position + dropout_counter(seed, 0)) if idx else dropout_counter(seed, 0)
        return where(uniform(counter) >= p, x[idx] * (1.0 / (1.0 - p)), 0.0)

    return Compute(names("d", range(x.ndim)), body)
