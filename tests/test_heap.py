"""stratagem.heap: glibc's heap kept for reuse while simulating, unless the user says otherwise."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

from stratagem.heap import OPT_OUT, keep_freed_memory


@pytest.mark.parametrize("variable", ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", OPT_OUT])
def test_left_alone_where_the_environment_decides(monkeypatch, variable):
    monkeypatch.setenv(variable, "0")
    assert keep_freed_memory() is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_tuned_on_glibc(monkeypatch):
    for variable in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", OPT_OUT):
        monkeypatch.delenv(variable, raising=False)
    import platform
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    assert keep_freed_memory() is True


_HEAP_PROGRAM = """
import ctypes, numpy as np
from stratagem.heap import release_freed_memory
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
