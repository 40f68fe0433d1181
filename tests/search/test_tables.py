"""Frontier tables' keys (search.tables): equal exactly for equal arrays, which is what lets the
memo reuse a repeated layer's reductions (FT itself: test_ft.py)."""

import numpy as np

from stratagem.search.tables import content_key


def test_content_key_is_equal_for_equal_arrays_only():
    rng = np.random.default_rng(0)
    mem, time = rng.random((2, 3, 4)), rng.random((2, 3, 4))
    key = content_key(mem, time)
    assert content_key(mem.copy(), time.copy()) == key
    assert content_key(np.asfortranarray(mem), time) == key            # a layout is not a content
    assert content_key(mem.transpose(0, 2, 1).copy().transpose(0, 2, 1), time) == key
    changed = mem.copy()
    changed[1, 2, 3] = np.nextafter(changed[1, 2, 3], 2.0)
    assert content_key(changed, time) != key
    assert content_key(time, mem) != key                                # which array is which
    assert content_key(mem.reshape(2, 4, 3), time.reshape(2, 4, 3)) != key   # same bytes, another shape
    assert content_key(mem.astype(np.float32), time.astype(np.float32)) != key
    ints = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    assert content_key(ints, ints) != content_key(ints.view(np.float64), ints.view(np.float64))
