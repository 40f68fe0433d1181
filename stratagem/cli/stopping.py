"""Ctrl-C while a command plans. The first stops the search: it raises KeyboardInterrupt, which the
search catches where it knows its best so far and returns that, marked (search.stopping); the
command writes it as usual and says so. A second Ctrl-C aborts at once: it raises `Aborted`, which
no search catches; the command ends with exit code 130 and the file it was writing is left as it
was (files.atomic_write_*: whole or not at all). The processes planning forks to share its work
(stratagem.forked) ignore SIGINT; either Ctrl-C kills and reaps them before it propagates.

    with first_ctrl_c_stops(out.note):    # SIGINT handled so for the block, as before after it
        ...
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

EXIT_ABORTED = 130                  # 128 + SIGINT, as a shell reports a process Ctrl-C ended
FIRST = "Ctrl-C: stopping the search; the best plan found so far will be kept (Ctrl-C again to abort)"


class Aborted(BaseException):
    """A second Ctrl-C: not an Exception, nor a KeyboardInterrupt, so that no search keeps going."""


class _Presses:
    """SIGINT's handler while planning: a count of presses, the first a KeyboardInterrupt."""

    def __init__(self, note: Callable[[str], None]):
        self.count, self.note = 0, note

    def __call__(self, signum, frame) -> None:
        self.count += 1
        if self.count > 1:
            raise Aborted
        self.note(FIRST)
        raise KeyboardInterrupt


@contextlib.contextmanager
def first_ctrl_c_stops(note: Callable[[str], None]) -> Iterator[None]:
    """SIGINT as above for the block (`note` says what the first does). Off the main thread, where
    Python allows no signal handler, Ctrl-C is left as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _Presses(note))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


__all__ = ["EXIT_ABORTED", "Aborted", "first_ctrl_c_stops"]
