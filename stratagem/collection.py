"""Python's cyclic garbage collector, run less often while planning.

Planning makes millions of small objects (tasks, layouts, table rows), nearly all freed by
reference counting; with CPython's default thresholds (700, 10, 10) a full collection over
everything the cost model keeps runs every few hundred thousand of them: a third of the time
of building the Transformer's task graph at 64 devices. Inside `fewer_collections` the
thresholds are raised (a young collection every 100,000 objects); they are restored on the way
out, so a program that imports stratagem keeps its own.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

YOUNG_THRESHOLD = 100_000


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], YOUNG_THRESHOLD), max(before[1], 50), max(before[2], 100))
    try:
        yield
    finally:
        gc.set_threshold(*before)


__all__ = ["fewer_collections"]
