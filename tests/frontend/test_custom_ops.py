"""stratagem::gated_lstm_cell is nn.LSTMCell's step with gate-major weights: same values, same grads.

Compared in float64 within the rounding of the computation (stratagem.tdl.rounding): a gate sums
i + h products and two biases, then a few elementwise ops; backward about doubles that."""

import pytest
import torch

from stratagem.frontend.custom_ops import gated_lstm_cell
from stratagem.tdl.rounding import unit_roundoff

pytestmark = pytest.mark.numerics     # run under every kernel path by scripts/numerics_variants.sh


def _rtol(i: int, h: int) -> float:
    return 2 * unit_roundoff("float64") * 3 * (2 * (i + h) + 2 + 8)


def test_forward_and_gradients_equal_aten_lstm_cell():
    torch.manual_seed(0)
    b, i, h = 3, 5, 4
    f64 = {"dtype": torch.float64}
    x, hx, cx = torch.randn(b, i, **f64), torch.randn(b, h, **f64), torch.randn(b, h, **f64)
    w_ih, w_hh = torch.randn(4, h, i, **f64), torch.randn(4, h, h, **f64)
    b_ih, b_hh = torch.randn(4, h, **f64), torch.randn(4, h, **f64)
    close = {"rtol": _rtol(i, h), "atol": _rtol(i, h) * 10}    # operands of size ~ N(0, 1) * (i + h)
    leaves = [t.clone().requires_grad_(True) for t in (x, hx, cx, w_ih, w_hh, b_ih, b_hh)]
    ours = gated_lstm_cell(*leaves)
    twins = [t.clone().requires_grad_(True) for t in (x, hx, cx, w_ih, w_hh, b_ih, b_hh)]
    ref = torch.ops.aten.lstm_cell(twins[0], [twins[1], twins[2]], twins[3].reshape(4 * h, i),
                                   twins[4].reshape(4 * h, h), twins[5].reshape(-1), twins[6].reshape(-1))
    for a, r in zip(ours, ref):
        torch.testing.assert_close(a, r, **close)
    weights = (torch.randn(b, h, **f64), torch.randn(b, h, **f64))
    grads = torch.autograd.grad(ours, leaves, weights)
    ref_grads = torch.autograd.grad(ref, twins, weights)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, **close)


def test_exports_as_one_node():
    class Cell(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w_ih, self.w_hh = torch.nn.Parameter(torch.randn(4, 3, 2)), torch.nn.Parameter(torch.randn(4, 3, 3))

        def forward(self, x, h, c):
            return gated_lstm_cell(x, h, c, self.w_ih, self.w_hh, None, None)[0].sum()

    program = torch.export.export(Cell(), (torch.randn(2, 2), torch.randn(2, 3), torch.randn(2, 3)), strict=False)
    targets = [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
    assert targets.count("stratagem.gated_lstm_cell.default") == 1
