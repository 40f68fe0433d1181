"""The garbage collector's thresholds while planning (stratagem.collection)."""

import gc

import pytest

from stratagem.collection import YOUNG_THRESHOLD, fewer_collections


def test_thresholds_are_raised_inside_and_restored_after_even_on_error():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError):
        with fewer_collections():
            assert gc.get_threshold()[0] >= YOUNG_THRESHOLD
            with fewer_collections():
                assert gc.get_threshold()[0] >= YOUNG_THRESHOLD
            assert gc.get_threshold()[0] >= YOUNG_THRESHOLD
            raise RuntimeError("planning failed")
    assert gc.get_threshold() == before
