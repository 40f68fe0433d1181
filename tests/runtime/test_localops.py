"""Adapters against the whole op: every split that space.runnable sends through an adapter, run
worker by worker on exactly what each worker holds, reassembles the whole output (the ground-truth
cases of tests/tdl, where the plain kernel is known to be wrong for these splits)."""

from __future__ import annotations

import pytest
import torch

from stratagem.frontend.calls import run_call
from stratagem.ir import Attrs
from stratagem.runtime.localops import ADAPTERS, local_call, run_local
from stratagem.runtime.views import worker_view
from stratagem.space import Configuration, Level, layout
from stratagem.space.halo import Halo, halo_exchange
from stratagem.space.regions import input_boxes
from stratagem.space.runnable import SPLIT_RULES, refusal, split_rule
from stratagem.space.tensor_layout import input_layout
from stratagem.tdl.analysis import Analysis
from stratagem.tdl.library import LIBRARY
from tests.tdl.test_ground_truth import (
    NOT_SHARD_LOCAL, as_numpy, assert_close, combine, instances, local_input, run_torch, splits, to_torch,
)

pytestmark = pytest.mark.numerics     # run under every kernel path by scripts/numerics_variants.sh

ADAPTED = sorted(k for k, rules in SPLIT_RULES.items() if any(r.adapter not in (None, "window") for r in rules))


def test_every_rule_names_an_adapter_that_exists():
    named = {r.adapter for rules in SPLIT_RULES.values() for r in rules if r.adapter}
    assert named == set(ADAPTERS)


def test_every_split_the_plain_kernel_gets_wrong_is_adapted_or_refused():
    for name, (chosen, _) in NOT_SHARD_LOCAL.items():
        for inst in instances(name):
            for split in splits(inst.analysis):
                if split.is_regular and chosen(inst.analysis, split):
                    rule = split_rule(inst.analysis, name, inst.analysis.desc.attrs, split.dim)
                    assert rule is not None, f"{name} split {split.dim}: no rule"


def _run_worker(name, inst, split, worker):
    config = Configuration((Level(split.dim, split.parts),))
    view = worker_view(inst.analysis, config, worker)
    share = split.workers[worker]
    local = [local_input(a, p, box, split, worker) for a, p, box in
             zip(inst.arrays, split.placements, share.input_boxes)]
    tensors = [to_torch(a, k) for a, k in zip(local, inst.kinds)]
    attrs = LIBRARY[name].attrs_with_defaults(inst.case.attrs)
    rule = split_rule(inst.analysis, name, inst.analysis.desc.attrs, split.dim)
    return as_numpy(run_local(name, attrs, tensors, view, inst.analysis, rule.adapter if rule else None))


@pytest.mark.parametrize("name", ADAPTED)
def test_adapted_splits_reassemble(name):
    tried = 0
    for inst in instances(name):
        whole = run_torch(name, inst, inst.arrays, inst.analysis.output_shape)
        for split in splits(inst.analysis):
            rule = split_rule(inst.analysis, name, inst.analysis.desc.attrs, split.dim)
            if not split.is_regular or rule is None or rule.adapter is None:
                continue
            outputs = [_run_worker(name, inst, split, w) for w in range(split.parts)]
            assert_close(combine(split, inst.analysis, outputs), whole,
                         f"{name} {inst.case} adapter {rule.adapter}, split {split.dim} x{split.parts}",
                         inst.analysis)
            tried += 1
    assert tried, f"{name}: no case exercises its adapter"


def test_dropout_adapter_draws_the_whole_tensors_mask_at_global_positions():
    analysis = Analysis(LIBRARY["dropout"].describe((6, 10), p=0.4, train=True, seed=5))
    attrs = {"p": 0.4, "train": True, "seed": 5}
    x = torch.randn(6, 10, dtype=torch.float64)
    whole = run_local("dropout", attrs, [x], worker_view(analysis, Configuration(), 0), analysis)
    config = Configuration.of(d0=2, d1=2)
    parts = {}
    for device in range(4):
        view = worker_view(analysis, config, device)
        (r0, r1), (c0, c1) = view.out_box
        parts[(r0, c0)] = run_local("dropout", attrs, [x[r0:r1, c0:c1]], view, analysis, "dropout_positions")
    rows = [torch.cat([parts[(r, c)] for c in (0, 5)], dim=1) for r in (0, 3)]
    assert torch.equal(torch.cat(rows), whole)
    assert (whole == 0).any() and (whole != 0).any()


def test_an_opaque_call_gets_the_local_output_shape():
    call = Attrs(target="aten.view.default", args=(Attrs(tensor=0), (4, 6)), kwargs=Attrs(), output_index=None)
    local = local_call({"out_shape": (4, 6), "call": call}, (2, 6))
    assert local["args"][1] == (2, 6)
    assert run_call(local, [torch.zeros(2, 6)]).shape == (2, 6)


WINDOWED = sorted(k for k, rules in SPLIT_RULES.items() if any(r.adapter == "window" for r in rules))


def _halo_input(array, analysis, config, worker):
    """What a worker holds of a window's input after the halo exchange: its region along the halo
    dim (space.halo), the whole tensor along the others."""
    op_layout = layout(analysis, config)
    lay = input_layout(op_layout, 0, False, input_boxes(analysis, config, 0))
    halo = halo_exchange(lay, input_boxes(analysis, config, 0), tuple(array.shape))
    assert isinstance(halo, Halo), halo
    (axis,) = halo.axes
    start, stop = axis.needed[worker]
    return array[(slice(None),) * axis.dim + (slice(start, stop),)]


@pytest.mark.parametrize("name", WINDOWED)
def test_window_splits_reassemble_from_their_halo_regions(name):
    """Each worker's window adapter, given its halo region (padding, strides, dilations, ceil_mode
    of the ground-truth cases), or its chunk where the windows do not overlap, computes its chunk
    of the whole op's output."""
    tried = 0
    for inst in instances(name):
        whole = run_torch(name, inst, inst.arrays, inst.analysis.output_shape)
        for split in splits(inst.analysis):
            rule = split_rule(inst.analysis, name, inst.analysis.desc.attrs, split.dim)
            config = Configuration((Level(split.dim, split.parts),))
            if rule is None or rule.adapter != "window" or refusal(inst.analysis, config, split.parts):
                continue
            attrs = LIBRARY[name].attrs_with_defaults(inst.case.attrs)
            outputs = []
            for worker in range(split.parts):
                share = split.workers[worker]
                local = [local_input(a, p, box, split, worker) if p is not None else
                         _halo_input(a, inst.analysis, config, worker)
                         for a, p, box in zip(inst.arrays, split.placements, share.input_boxes)]
                tensors = [to_torch(a, k) for a, k in zip(local, inst.kinds)]
                view = worker_view(inst.analysis, config, worker)
                outputs.append(as_numpy(run_local(name, attrs, tensors, view, inst.analysis, "window")))
            assert_close(combine(split, inst.analysis, outputs), whole,
                         f"{name} {inst.case} window, split {split.dim} x{split.parts}", inst.analysis)
            tried += 1
    assert tried, f"{name}: no case exercises the window adapter"
