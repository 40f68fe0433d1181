"""The graph at another batch size, derived from one capture and an export with a symbolic batch
(frontend.rebatch), is the graph capture gives at that size, field by field; where exactness is not
assured (batch 1, sizes that coincide, a model that branches on its batch) it is not derived."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from stratagem.frontend import zoo
from stratagem.frontend.capture import capture, capture_with_exports
from stratagem.frontend.rebatch import batch_family, derived_graph, derived_program


def assert_same_graph(derived, captured):
    assert derived.name == captured.name and derived.outputs == captured.outputs
    assert dict(derived.tensors) == dict(captured.tensors)
    assert derived.ops == captured.ops
    assert derived.meta == captured.meta
    assert derived == captured


def rebatched_and_captured(name, batch, captured_batch):
    """(the graph derived from the batch family of the capture at `captured_batch`, else
    captured as the zoo's `rebatched` then does; a fresh capture's graph; whether the first was
    derived). The zoo's `rebatched` captures a model of twin blocks (test below), so its
    derivation is called here directly."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models = zoo.Zoo()
        family = models.family(name, captured_batch)
        derived = derived_graph(family, batch, zoo._example(name, batch), name)
        if derived is None:
            derived = models._captured(name, batch, derived_program(family, batch + 1)).graph
        return derived, zoo.Zoo().build(name, batch_size=batch), derived_program(family, batch) is not None


def test_the_zoo_captures_a_model_of_twin_blocks_at_a_micro_batch():
    """Its exports trace one block per kind of call: cheaper than a family's symbolic export."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models = zoo.Zoo()
        rebatched = models.rebatched("gpt-tiny", batch_size=8, captured_batch=16)
        assert models._family is None
        assert_same_graph(rebatched, zoo.Zoo().build("gpt-tiny", batch_size=8))


@pytest.mark.parametrize("batch", [8, 6])
def test_gpt_tiny_at_a_micro_batch_is_its_capture(batch):
    derived, captured, was_derived = rebatched_and_captured("gpt-tiny", batch, 16)
    assert was_derived
    assert_same_graph(derived, captured)


@pytest.mark.parametrize("batch", [6, 5])
def test_a_hugging_face_llama_at_a_micro_batch_is_its_capture(batch):
    pytest.importorskip("transformers")
    derived, captured, was_derived = rebatched_and_captured("hf:llama-tiny", batch, 8)
    assert was_derived
    assert_same_graph(derived, captured)


def test_batch_one_and_sizes_that_coincide_are_captured():
    one, captured_one, derived_one = rebatched_and_captured("gpt-tiny", 1, 8)
    assert not derived_one                      # export specializes size 1: its graph differs
    assert_same_graph(one, captured_one)
    four, captured_four, derived_four = rebatched_and_captured("gpt-tiny", 4, 8)
    assert not derived_four                     # 4 sequences, 4 heads: a trace may compare them
    assert_same_graph(four, captured_four)


class Rows(nn.Module):
    """A reshape through the batch (flattened rows), a loss: sizes in arguments, not only shapes."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 10)

    def forward(self, x):
        b = x.shape[0]
        h = torch.relu(self.linear(x.reshape(b * 3, 6)))
        return h.reshape(b, 3, 10).mean(dim=1).sum()


class Branching(Rows):
    """Computes differently above a batch of 4."""

    def forward(self, x):
        y = super().forward(x)
        return y * 2 if x.shape[0] > 4 else y


def family_of(model, batch):
    inputs_at = lambda b: (torch.empty(b, 3, 6, device="meta"),)   # noqa: E731
    return batch_family(model, inputs_at, capture_with_exports(model, inputs_at(batch)), batch), inputs_at


@pytest.mark.parametrize("batch", [4, 7])
def test_a_module_reshaping_through_its_batch_derives_exactly(batch):
    with torch.device("meta"):
        model = Rows()
    family, inputs_at = family_of(model, 12)
    assert family is not None
    derived = derived_graph(family, batch, inputs_at(batch), "Rows")
    assert derived is not None
    assert_same_graph(derived, capture(model, inputs_at(batch), name="Rows"))


def test_a_module_branching_on_its_batch_gets_no_family():
    with torch.device("meta"):
        model = Branching()
    family, _ = family_of(model, 8)
    assert family is None


def test_a_family_matches_the_keys_a_worker_sent_for_its_grown_export():
    from dataclasses import replace

    from stratagem import forked
    from stratagem.frontend.batchdims import ProgramShapes
    if forked.worker_count(2) < 2:
        pytest.skip("one CPU: no worker")
    with torch.device("meta"):
        model = Rows()
    inputs_at = lambda b: (torch.empty(b, 3, 6, device="meta"),)   # noqa: E731
    captured = capture_with_exports(model, inputs_at(12))
    assert isinstance(captured.grown, ProgramShapes)           # exported in a worker: only its record came
    assert batch_family(model, inputs_at, captured, 12) is not None
    keys = list(captured.grown.keys)
    at = next(i for i, key in enumerate(keys) if key[1] == "call_function")
    keys[at] = keys[at][:4] + (("tensor", (1,), (1,), 0, torch.float32, "meta"),)   # another value there
    tampered = replace(captured, grown=replace(captured.grown, keys=tuple(keys)))
    assert batch_family(model, inputs_at, tampered, 12) is None
