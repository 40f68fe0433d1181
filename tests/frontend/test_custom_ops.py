"""stratagem::gated_lstm_cell is nn.LSTMCell's step with gate-major weights: same values, same grads."""

import torch

from stratagem.frontend.custom_ops import gated_lstm_cell


def test_forward_and_gradients_equal_aten_lstm_cell():
    torch.manual_seed(0)
    b, i, h = 3, 5, 4
    x, hx, cx = torch.randn(b, i), torch.randn(b, h), torch.randn(b, h)
    w_ih, w_hh = torch.randn(4, h, i), torch.randn(4, h, h)
    b_ih, b_hh = torch.randn(4, h), torch.randn(4, h)
    leaves = [t.clone().requires_grad_(True) for t in (x, hx, cx, w_ih, w_hh, b_ih, b_hh)]
    ours = gated_lstm_cell(*leaves)
    twins = [t.clone().requires_grad_(True) for t in (x, hx, cx, w_ih, w_hh, b_ih, b_hh)]
    ref = torch.ops.aten.lstm_cell(twins[0], [twins[1], twins[2]], twins[3].reshape(4 * h, i),
                                   twins[4].reshape(4 * h, h), twins[5].reshape(-1), twins[6].reshape(-1))
    for a, r in zip(ours, ref):
        torch.testing.assert_close(a, r)
    weights = (torch.randn(b, h), torch.randn(b, h))
    grads = torch.autograd.grad(ours, leaves, weights)
    ref_grads = torch.autograd.grad(ref, twins, weights)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)


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
