"""Every library op's record (tdl.trace.OpDef) against what PyTorch does when the op runs.

The record's `view` and `saves` are what memory, the simulator and coarsening read; here each op
runs on its ground-truth cases (tests/tdl/cases.py) through its torch implementation (TORCH_OPS,
what the runtime runs), and
  - an op declared a view returns a tensor on its input's storage, and an op not declared one
    does not (a view the record missed is memory counted twice, one it claims is memory missed);
  - what autograd packs for backward (torch.autograd.graph.saved_tensors_hooks), sorted into
    "the op's inputs" and "its outputs" by storage, is what `saves` says, over all the op's cases.
Buffers the kernel makes for its own backward (max-pool indices, a layer norm's statistics,
dropout's mask) are no input or output; the record does not speak of them.
"""

from __future__ import annotations

import pytest
import torch

from stratagem.frontend.torch_ops import TORCH_OPS
from stratagem.tdl.analysis import Analysis
from stratagem.tdl.library import LIBRARY
from stratagem.tdl.trace import SAVES, VIEWS
from tests.tdl.cases import CASES
from tests.tdl.test_ground_truth import OPS, instances, to_torch

# The record says what the op is in an ATen graph; these implementations do less, never more.
COPIES_LESS_THAN_ATEN = {
    "to_copy": "aten._to_copy always copies; Tensor.to returns its input when the dtype is the same",
}
SAVED_SETS = {"nothing": set(), "output": {"output"}, "inputs": {"input"},
              "inputs_and_output": {"input", "output"}}


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _run(name: str, inst, grad_inputs: str):
    """(outputs, data inputs, packed tensors) of one run; grad_inputs is "all" floating inputs or
    "first" (for kernels that refuse a gradient on some input, as batch norm's running stats)."""
    tensors = [to_torch(a, k) for a, k in zip(inst.arrays, inst.kinds)]
    floating = [t for t in tensors if t is not None and t.is_floating_point()]
    for t in floating if grad_inputs == "all" else floating[:1]:
        t.requires_grad_()
    packed: list[torch.Tensor] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        out = TORCH_OPS[name](tensors, LIBRARY[name].attrs_with_defaults(inst.case.attrs),
                              tuple(inst.analysis.output_shape))
    outputs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    return outputs, [t for t in tensors if t is not None], packed


def run_with_grad(name: str, inst):
    try:
        return _run(name, inst, "all")
    except RuntimeError:
        return _run(name, inst, "first")


@pytest.mark.parametrize("name", OPS)
def test_every_op_record_is_complete(name):
    """What every package asks of an op, answered by its record (or derived from its description)."""
    record = LIBRARY[name]
    analysis = Analysis(record.describe_example())
    assert record.doc, f"{name}: no one-line doc (what `stratagem ops` lists)"
    assert analysis.flops() >= 0 and isinstance(analysis.is_elementwise, bool)
    assert analysis.dims and analysis.output_shape is not None
    assert name in TORCH_OPS, f"{name}: no torch kernel for the runtime"
    assert name in CASES, f"{name}: no ground-truth cases"


def test_the_record_vocabulary_is_closed():
    assert set(SAVED_SETS) == set(SAVES)
    for name, record in LIBRARY.items():
        assert record.view in (None, *VIEWS) and record.saves in SAVES, name
        assert record.view is None or (record.saves == "nothing"), f"{name}: a view keeps nothing"


@pytest.mark.parametrize("name", OPS)
def test_an_op_is_a_view_exactly_when_its_record_says(name):
    declared = LIBRARY[name].view is not None
    for inst in instances(name):
        outputs, inputs, _ = run_with_grad(name, inst)
        if outputs[0].numel() == 0:
            continue
        aliases = any(_same_storage(outputs[0], t) for t in inputs)
        if aliases and not declared:
            assert name in COPIES_LESS_THAN_ATEN, f"{name} {inst.case}: returns a view; declare view= in its record"
        elif declared:
            assert aliases, f"{name} {inst.case}: declared a view but returns a copy"


@pytest.mark.parametrize("name", OPS)
def test_what_autograd_keeps_is_what_the_record_says(name):
    seen: set[str] = set()
    differentiable = False
    for inst in instances(name):
        outputs, inputs, packed = run_with_grad(name, inst)
        if not any(o.grad_fn is not None for o in outputs):
            continue
        differentiable = True
        for t in packed:
            if any(_same_storage(t, o) for o in outputs):
                seen.add("output")
            elif any(_same_storage(t, i) for i in inputs):
                seen.add("input")
    if differentiable:
        assert seen == SAVED_SETS[LIBRARY[name].saves], (
            f"{name}: autograd keeps {sorted(seen) or 'nothing'}, the record says saves={LIBRARY[name].saves!r}")
