"""TORCH_OPS: one implementation per library op, and dropout's mask equal in numpy and torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from stratagem.frontend.torch_impl.rng import dropout_keep, uniform
from stratagem.frontend.torch_ops import TORCH_OPS
from stratagem.tdl import rng
from stratagem.tdl.library import LIBRARY

pytestmark = pytest.mark.numerics     # run under every kernel path by scripts/numerics_variants.sh


def test_every_library_op_but_opaque_has_an_implementation():
    assert set(TORCH_OPS) == set(LIBRARY) - {"opaque"}


def test_the_counter_based_uniform_is_the_same_in_torch_and_numpy():
    counters = np.array([0, 1, 2, 12345, 2**32 + 7, 2**40 + 3, 2**52 - 1], dtype=np.int64)
    np.testing.assert_array_equal(uniform(torch.from_numpy(counters)).numpy(), rng.uniform(counters))


def test_the_counter_based_uniform_looks_uniform():
    values = rng.uniform(np.arange(100_000))
    assert abs(values.mean() - 0.5) < 0.01 and abs(values.var() - 1 / 12) < 0.002
    assert np.histogram(values, bins=10, range=(0, 1))[0].min() > 9_500


def test_dropout_keeps_about_one_minus_p_and_scales_what_it_keeps():
    x = torch.ones(200, 50)
    out = TORCH_OPS["dropout"]([x], {"p": 0.3, "train": True, "seed": 3}, (200, 50))
    kept = out != 0
    assert abs(kept.float().mean().item() - 0.7) < 0.02
    assert torch.allclose(out[kept], torch.full_like(out[kept], 1 / 0.7))
    assert torch.equal(kept, dropout_keep((200, 50), 0.3, 3))
    other_seed = TORCH_OPS["dropout"]([x], {"p": 0.3, "train": True, "seed": 4}, (200, 50)) != 0
    assert not torch.equal(kept, other_seed)
