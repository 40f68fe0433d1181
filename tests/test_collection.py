"""The garbage collector's thresholds while planning, and freed memory handed back (stratagem.collection)."""

import ctypes
import gc
import subprocess
import sys

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


_HEAP_PROGRAM = """
import ctypes, numpy as np
from stratagem.collection import release_freed_memory
def resident(): return int(open('/proc/self/statm').read().split()[1]) * 4096
blocks, kept = [], []
for _ in range(4000):
    blocks.append(np.ones(8192))          # 64 KiB: below glibc's mmap threshold, on the heap
    kept.append(np.ones(512))             # 4 KiB blocks kept between them: the heap cannot shrink from its top
del blocks
before = resident()
release_freed_memory()
print(before - resident())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or getattr(ctypes.CDLL(None), "malloc_trim", None) is None,
                    reason="malloc_trim is glibc's")
def test_freed_heap_blocks_are_handed_back():
    """4,000 freed 64 KiB arrays (250 MiB) between live 4 KiB ones: resident until released, most
    of them handed back after (and none without the release: the test's premise)."""
    done = subprocess.run([sys.executable, "-c", _HEAP_PROGRAM], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 4000 * 65536 // 2
    kept = subprocess.run([sys.executable, "-c", _HEAP_PROGRAM.replace("release_freed_memory()", "pass")],
                          capture_output=True, text=True, timeout=120)
    assert kept.returncode == 0 and int(kept.stdout) < 4000 * 65536 // 4
