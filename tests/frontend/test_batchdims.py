"""The batch dim is the one dim that grows by exactly one when the batch does."""

from __future__ import annotations

import torch

from stratagem.frontend.batchdims import compare, with_one_more_sample


def meta(*shape):
    return torch.empty(shape, device="meta")


def shape(*dims):
    return tuple(meta(*dims).shape)


def test_the_one_dim_that_grew_by_one_is_the_batch():
    assert compare(shape(4, 3, 7), shape(4, 4, 7)) == 1


def test_flattened_or_multiplied_batches_are_not_batch_dims():
    assert compare(shape(8, 5), shape(10, 5)) is None          # [B*2, 5]
    assert compare(shape(4, 4), shape(5, 5)) is None           # an outer product over the batch
    assert compare(shape(4, 3), shape(4, 3)) is None           # no batch at all
    assert compare(shape(4, 3), shape(5, 3, 1)) is None        # a different rank
    assert compare(None, (4,)) is None and compare((4,), None) is None      # a value that is no tensor


def test_inputs_grow_along_their_sample_dims_only():
    x, ids, scale = meta(2, 3), torch.zeros(5, 2, dtype=torch.long), 0.5
    same_scale, (grown_x, grown_ids) = with_one_more_sample((scale, (x, ids)), [None, 0, 1])
    assert grown_x.shape == (3, 3) and grown_x.device.type == "meta"
    assert grown_ids.shape == (5, 3) and grown_ids.dtype == torch.long
    assert same_scale == 0.5


class _BranchesOnTheBatch(torch.nn.Module):
    """A graph that changes with the batch size: an extra op for an odd batch."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        return (y * 2 if x.shape[0] % 2 else y).sum()


def _batch_warnings(build) -> list[str]:
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build()
    return [str(w.message) for w in caught if "cannot tell batch dims" in str(w.message)]


def test_a_graph_that_changes_with_the_batch_is_warned_about_unless_the_batch_is_one_sample():
    """Export drops what broadcasts to a batch of one (Hugging Face's position ids, expanded to the
    batch), so a graph of one sequence differs from the one of two: nothing splits one sample, so
    capture says nothing there; a graph that differs at a larger batch is still warned about."""
    from stratagem.frontend import capture, zoo
    assert _batch_warnings(lambda: capture(_BranchesOnTheBatch(), (torch.zeros(2, 4),)))
    name = "hf:llama-7b-tiny"
    module, _ = zoo.module(name, "meta", seed=0)
    one = []
    assert not _batch_warnings(lambda: one.append(capture(module, zoo.variant(name).inputs(1, torch.device("meta"), None),
                                                          name=name)))
    assert one[0].ops
