"""Recorded ATen calls: plain data in, the same result out."""

from __future__ import annotations

import torch

from stratagem.frontend.calls import encode_call, functional_target, resolve_target, run_call, target_name
from stratagem.ir import Attrs


def index_of(tensors):
    return lambda a: next((i for i, t in enumerate(tensors) if a is t), None)


def test_a_recorded_call_runs_again_with_the_same_result():
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    call = encode_call(torch.ops.aten.cat.default, ([x, y], 1), {}, index_of([x, y]), None)
    assert call["args"] == ((Attrs(tensor=0), Attrs(tensor=1)), 1)
    assert torch.equal(run_call(call, [x, y]), torch.cat([x, y], 1))


def test_dtypes_and_devices_are_recorded_by_name():
    x = torch.randn(2, 2)
    call = encode_call(torch.ops.aten.to.dtype_layout, (x,), {"dtype": torch.float16, "device": torch.device("meta")},
                       index_of([x]), None)
    assert call["kwargs"]["dtype"] == Attrs(dtype="float16")
    assert call["kwargs"]["device"] == Attrs(device="inputs")
    out = run_call(call, [x])
    assert out.dtype == torch.float16 and out.device == x.device


def test_an_element_of_a_tuple_output_is_selected():
    x = torch.randn(4, 6)
    call = encode_call(torch.ops.aten.split.Tensor, (x, 2, 1), {}, index_of([x]), 2)
    assert torch.equal(run_call(call, [x]), x[:, 4:6])


def test_an_argument_plain_data_cannot_hold_makes_no_call():
    x = torch.randn(2)
    assert encode_call(torch.ops.aten.add.Tensor, (x, object()), {}, index_of([x]), None) is None


def test_in_place_targets_are_recorded_out_of_place():
    assert functional_target(torch.ops.aten.relu_.default) is torch.ops.aten.relu.default
    assert functional_target(torch.ops.aten.copy_.default) is torch.ops.aten.copy.default
    assert functional_target(torch.ops.aten.relu.default) is torch.ops.aten.relu.default


def test_target_names_round_trip():
    target = torch.ops.aten.scaled_dot_product_attention.default
    assert target_name(target) == "aten.scaled_dot_product_attention.default"
    assert resolve_target(target_name(target)) is target
