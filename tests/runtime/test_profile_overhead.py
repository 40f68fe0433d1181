"""The runtime's own time per op and per input (runtime.profile_overhead)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from stratagem.plan import Plan  # noqa: E402
from stratagem.runtime.profile_overhead import CHAINS, counts, fit  # noqa: E402
from stratagem.space import Configuration  # noqa: E402


def test_the_fit_recovers_per_op_and_per_input_times():
    a_f, b_f, a_b, b_b = 2e-4, 3e-5, 1e-5, 2e-4
    rows = []
    for chain in CHAINS:
        ops, inputs, gradients = counts(chain.graph())
        rows.append(((ops, inputs, gradients), (a_f * ops + b_f * inputs, a_b * ops + b_b * gradients)))
    found = fit(rows, 30)
    assert (found.forward_time_s, found.forward_per_input_s) == pytest.approx((a_f, b_f), rel=1e-9)
    assert (found.backward_time_s, found.backward_per_gradient_s) == pytest.approx((a_b, b_b), rel=1e-9)
    assert found.forward_s(3) == pytest.approx(a_f + 3 * b_f) and found.backward_s(0) == 0.0


def test_a_negative_part_is_dropped_and_the_other_refitted():
    rows = [((16, 16 * k, 16 * k - 1), (16 * 3e-4 - 1e-5 * 16 * k, 1e-3)) for k in (1, 2, 3)]
    found = fit(rows, 30)
    assert found.forward_per_input_s == 0.0 and found.forward_time_s > 0
    assert found.backward_time_s >= 0 and found.backward_per_gradient_s >= 0


def test_the_chains_read_more_inputs_each_and_match_plain_torch():
    """The plan and the plain chain compute the same (else the overhead would hold a kernel's time),
    and the chains differ in inputs per op, so that the fit can tell per op from per input."""
    from stratagem.runtime.execute import PlanModule
    import torch.distributed as dist
    made = not dist.is_initialized()
    if made:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        per_op = []
        for chain in CHAINS:
            graph = chain.graph()
            ops, inputs, gradients = counts(graph)
            per_op.append(inputs / ops)
            assert gradients == inputs - 1                       # all but the data
            weights = {t.name: torch.randn(t.shape) * 0.1 for t in graph.tensors.values()
                       if t.role.value == "weight"}
            planned = PlanModule(Plan(graph, "cpu-1x1", 1, {op.name: Configuration(()) for op in graph.ops}),
                                 weights, torch.device("cpu"))
            x = torch.randn(8, 64)
            torch.testing.assert_close(planned(x), chain.plain(weights)(x))
        assert per_op == sorted(per_op) and len(set(per_op)) == len(per_op)
    finally:
        if made:
            dist.destroy_process_group()
