"""The C heap kept for reuse while simulating (glibc's malloc).

A simulation allocates and frees tens of megabytes of arrays (the task store's columns and pools,
the memory peak's events). glibc serves a block over its mmap threshold (128 KiB, raised as such
blocks are freed) with fresh pages, and trims the heap's top once more than twice that is free,
so every simulation touches its arrays' pages anew: on a virtual machine a fault costs ~2 us,
and a simulation of the Transformer at 64 devices takes 4,000 of them (8 ms of its 60).

`keep_freed_memory()` sets M_MMAP_THRESHOLD to 4 MiB (larger arrays still come from mmap, where
NumPy asks for huge pages) and M_TRIM_THRESHOLD to 64 MiB: a process that simulates keeps up to
64 MiB of freed memory at the heap's top for its next arrays. Process-wide and idempotent; left
alone where the environment sets glibc's own MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_, or
STRATAGEM_KEEP_FREED_MEMORY=0, and off glibc.

`release_freed_memory()` hands the pages of the heap's free blocks back to the system (glibc's
malloc_trim), wherever they lie: arrays under the mmap threshold stay resident when freed. FT's
memo on 16,384 GPUs holds gigabytes of such arrays until FT returns; released, they are not under
the simulations that follow (peak RSS 8.8 -> 5.4 GB with the memo's other savings).
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3       # glibc's mallopt parameters
MMAP_THRESHOLD_BYTES = 4 << 20
TRIM_THRESHOLD_BYTES = 64 << 20
OPT_OUT = "STRATAGEM_KEEP_FREED_MEMORY"


def keep_freed_memory() -> bool:
    """Tune glibc's heap as the module docstring says; whether it is (now) so tuned."""
    if not sys.platform.startswith("linux") or os.environ.get(OPT_OUT) == "0" \
            or "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):        # not glibc (no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1


def release_freed_memory() -> None:
    """malloc_trim(0) where the C library has it (glibc); elsewhere nothing."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)


__all__ = ["keep_freed_memory", "release_freed_memory"]
