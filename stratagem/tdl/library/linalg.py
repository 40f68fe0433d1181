"""Matrix products: one top-level Sum over k, so splitting k leaves the output P(sum) (Tofu case 2).

`addmm` and `baddbmm` take the matrices first and the added tensor last (ATen puts `self` first)
so that, listed alone, the first input's dim 0 is the sample dim, as for `mm`.
"""

from __future__ import annotations

from stratagem.errors import TDLError
from stratagem.tdl.expr import Compute, Sum
from stratagem.tdl.library.common import broadcast_index, broadcast_read, broadcast_shape, names
from stratagem.tdl.trace import op


def lead_names(count: int) -> list[str]:
    """Names of leading (batch-like) output dims: b, (b, s), else d0, d1, ..."""
    return {0: [], 1: ["b"], 2: ["b", "s"]}.get(count) or names("d", range(count))


@op(gemm=True, example=([5, 7], [7, 6]))
def mm(x, y):
    """x @ y for matrices [M, K] @ [K, N]."""
    return lambda m, n: Sum(lambda k: x[m, k] * y[k, n])


@op(gemm=True, example=([3, 5, 7], [3, 7, 6]))
def bmm(x, y):
    """Batched x @ y: [B, M, K] @ [B, K, N]."""
    return lambda b, m, n: Sum(lambda k: x[b, m, k] * y[b, k, n])


@op(gemm=True, example=([2, 1, 5, 7], [3, 7, 6]))
def matmul(x, y):
    """torch.matmul: 1-D operands are vectors; leading dims broadcast."""
    if x.ndim == 0 or y.ndim == 0:
        raise TDLError("op 'matmul': both operands need rank >= 1",
                       got=f"{list(x.shape)} and {list(y.shape)}", hint="Use mul for scalars")
    x_batch = x.shape[:-2] if x.ndim >= 2 else ()
    y_batch = y.shape[:-2] if y.ndim >= 2 else ()
    batch = broadcast_shape("matmul", x_batch, y_batch)
    rows, cols = x.ndim >= 2, y.ndim >= 2
    out_names = names("b", range(len(batch))) + (["m"] if rows else []) + (["n"] if cols else [])

    def body(*idx):
        b_idx, rest = idx[:len(batch)], list(idx[len(batch):])
        m = rest.pop(0) if rows else None
        n = rest.pop(0) if cols else None

        def term(k):
            xs = broadcast_index(x_batch, b_idx, batch) + ((m, k) if rows else (k,))
            ys = broadcast_index(y_batch, b_idx, batch) + ((k, n) if cols else (k,))
            return x[xs] * y[ys]

        return Sum(lambda k: term(k))

    return Compute(out_names, body)


@op(gemm=True, weights=("weight", "bias"), example=([5, 7], [6, 7], [6]))
def linear(x, weight, bias=None):
    """x @ weight.T + bias over x's last dim; leading dims are kept."""
    lead = lead_names(x.ndim - 1)

    def body(*idx):
        *xi, j = idx
        out = Sum(lambda k: x[(*xi, k)] * weight[j, k])
        return out if bias is None else out + bias[j]

    return Compute([*lead, "j"], body)


@op(gemm=True, example=([5, 7], [7, 6], [6]))
def addmm(mat1, mat2, input, *, beta=1, alpha=1):  # noqa: A002 - ATen's argument name
    """beta * input + alpha * (mat1 @ mat2), input broadcast to [M, N]."""
    shape = (mat1.shape[0], mat2.shape[1])

    def body(m, n):
        product = Sum(lambda k: mat1[m, k] * mat2[k, n])
        product = product if alpha == 1 else alpha * product
        if beta == 0:
            return product
        added = broadcast_read(input, (m, n), shape)
        return product + (added if beta == 1 else beta * added)

    return Compute(["m", "n"], body)


@op(example=([3, 5, 7], [3, 7, 6], [3, 5, 6]))
def baddbmm(batch1, batch2, input, *, beta=1, alpha=1):  # noqa: A002 - ATen's argument name
    """beta * input + alpha * (batch1 @ batch2), input broadcast to [B, M, N]."""
    shape = (batch1.shape[0], batch1.shape[1], batch2.shape[2])

    def body(b, m, n):
        product = Sum(lambda k: batch1[b, m, k] * batch2[b, k, n])
        product = product if alpha == 1 else alpha * product
        if beta == 0:
            return product
        added = broadcast_read(input, (b, m, n), shape)
        return product + (added if beta == 1 else beta * added)

    return Compute(["b", "m", "n"], body)
