"""Independent work shared with forked processes: planning's searches are Python, one core each.

    shared_map(fn, items, on_result)   [fn(item) for item in items]:
        workers w = min(the CPUs this process may use, `workers`, MAX_WORKERS, len(items));
        item i runs in worker i mod w: worker 0 is this process, workers 1..w-1 are children
        forked after everything they need was built (cost model, caches, compiled kernels:
        nothing is pickled on the way in); each child pickles each result onto its pipe as soon
        as it has it, and this process reads the pipes between its own items (so none fills) and
        at the end. Results come back in item order; on_result(i, result) sees each here as it
        arrives (progress, partial results).
    background(fn)                     one child runs fn(send) while this process goes on; what
                                       it sends arrives here in order (Background.take); a
                                       thread of the child writes it, so the child goes on
                                       while this process has not read it yet.

Serial (shared_map makes the same calls in this process; background gives None, and the caller
does the work itself) off Linux, with one CPU, with STRATAGEM_WORKERS=1, or inside a child: no
nested forks. What travels back must pickle (plans do, graphs and strategies included).

A child that raises or dies is not trusted with the rest of its work: shared_map computes here
the items it did not return, so an error of fn raises here as a serial run raises it, and a
failure of the child's own (a result that does not pickle, a death) is a RuntimeWarning; a
background child's failure is said in Background.failure. Anything raised here (a Ctrl-C
included) kills the children and reaps them before it propagates: none is left behind. A child
ignores SIGINT (a terminal sends it to the whole group; this process decides), and one whose
parent died stops at its next message (its pipe is closed).
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import queue
import select
import signal
import struct
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from stratagem.errors import ConfigError

T = TypeVar("T")
R = TypeVar("R")

MAX_WORKERS = 8
CHILD_ENV = "STRATAGEM_FORKED_WORKER"       # set in a child: it forks no further
WORKERS_ENV = "STRATAGEM_WORKERS"            # a user's cap on the processes (1: serial)
_HEADER = struct.Struct("<Q")                 # a message's length, before its pickle


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS says, else the count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def worker_count(items: int, workers: int | None = None) -> int:
    """How many processes `shared_map` uses for `items` items: at most `workers` (None: the
    usable CPUs, at most MAX_WORKERS and at most $STRATAGEM_WORKERS), never more than the items;
    1 off Linux (macOS's system libraries are not safe across a fork without exec) and inside a
    child."""
    if not sys.platform.startswith("linux") or os.environ.get(CHILD_ENV):
        return 1
    wanted = min(usable_cpus(), MAX_WORKERS, _workers_allowed()) if workers is None else workers
    return max(1, min(wanted, items))


def _workers_allowed() -> int:
    """$STRATAGEM_WORKERS: the most processes planning may use (1: none forked)."""
    given = os.environ.get(WORKERS_ENV, "").strip()
    if not given:
        return MAX_WORKERS
    if not given.isdigit() or int(given) < 1:
        raise ConfigError(f"{WORKERS_ENV} is not a count of processes", expected="an integer >= 1 (1: no process "
                          "forked)", got=repr(given), hint=f"unset {WORKERS_ENV} to use every CPU")
    return int(given)


def shared_map(fn: Callable[[T], R], items: Sequence[T],
               on_result: Callable[[int, R], None] | None = None, workers: int | None = None) -> list[R]:
    """[fn(item) for item in items], the items shared among forked workers (module docstring)."""
    report = on_result or (lambda i, r: None)
    count = worker_count(len(items), workers)
    if count == 1:
        return [_reported(report, i, fn(item)) for i, item in enumerate(items)]
    results: dict[int, Any] = {}
    children = _fork_children(fn, items, count)
    try:
        for i in range(0, len(items), count):
            results[i] = _reported(report, i, fn(items[i]))
            for child in children:
                child.drain(results, report, block=False)
        for child in children:
            child.drain(results, report, block=True)
        undone = [i for i in range(len(items)) if i not in results]
        for i in undone:                     # what a failed child left undone, in order
            results[i] = _reported(report, i, fn(items[i]))
        if undone:                           # fn ran here: the failure was the child's own
            failures = [child.failure for child in children if child.failure] or ["it ended early"]
            warnings.warn(f"a forked worker failed ({failures[0]}); this process computed the "
                          f"{len(undone)} items it left", RuntimeWarning, stacklevel=2)
    finally:
        for child in children:
            child.stop()
    return [results[i] for i in range(len(items))]


@contextlib.contextmanager
def background(fn: Callable[[Callable[[Any], None]], None]) -> Iterator[Background | None]:
    """fn(send) run in a forked child while this process goes on; what it sends arrives here
    (`Background.take`). None where shared_map would run serially (the caller then runs fn's
    work itself). The child is killed, if it still runs, and reaped on the way out."""
    if worker_count(2) < 2:
        yield None
        return
    job = Background(_fork(lambda fd: _in_background(fn, fd)))
    try:
        yield job
    finally:
        job.child.stop()


@dataclass
class Background:
    """A child started by `background`, as this process sees it."""
    child: _Child

    def take(self, wait: bool) -> list[Any]:
        """What the child sent since the last take, in order; with `wait`, at least one message
        unless the child has ended (`ended`)."""
        received: list[Any] = []
        self.child.drain_some(received, wait)
        return received

    def messages(self) -> Iterator[Any]:
        """Each message the child sends, as it comes, until its end."""
        while not self.ended:
            yield from self.take(wait=True)

    @property
    def ended(self) -> bool:
        return self.child.done

    @property
    def failure(self) -> str:
        """What ended the child early ("" where fn returned)."""
        return self.child.failure


def _in_background(fn: Callable[[Callable[[Any], None]], None], fd: int) -> int:
    writer = _Writer(fd)

    def send(obj: Any) -> None:
        if not _send(writer.write, 0, lambda: obj):
            raise _Unsent
    try:
        fn(send)
    except (_Unsent, BrokenPipeError):
        return 1
    except Exception as error:
        writer.write(_failure(0, error))
        return 1
    finally:
        writer.close()
    return 0


class _Writer:
    """A background child's pipe, written by a thread of its own: a message larger than the
    pipe holds waits in the child's memory, not in a blocked write, while this process is busy
    elsewhere (FT's passes: the pipeline search's plans, sent while FT runs, would otherwise
    hold the child until FT's end), and the child goes on with its next task. Pickled by the
    sender, so what does not pickle fails at `send`; `write` raises BrokenPipeError once the
    pipe is closed (this process died); `close` waits until everything is written."""

    def __init__(self, fd: int):
        self.fd, self.queue, self.broken = fd, queue.SimpleQueue(), False
        self.thread = threading.Thread(target=self._run, name="stratagem-background-writer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (data := self.queue.get()) is not None:
            try:
                _write_all(self.fd, data)
            except OSError:
                self.broken = True
                return

    def write(self, data: bytes) -> None:
        if self.broken:
            raise BrokenPipeError("the planner's end of the pipe is closed")
        self.queue.put(data)

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join()


class _Unsent(Exception):
    """A message could not be pickled (the child has said why)."""


def _reported(report: Callable[[int, Any], None], i: int, result: Any) -> Any:
    report(i, result)
    return result


@dataclass
class _Child:
    """A forked worker as this process sees it: its pid and the read end of its pipe."""
    pid: int
    fd: int
    buffer: bytearray = field(default_factory=bytearray)
    done: bool = False
    failure: str = ""          # what stopped the child early, as it said (or that it died)

    def drain(self, results: dict[int, Any], report: Callable[[int, Any], None], block: bool) -> None:
        """Read what the child has sent (all of it, to its end, when `block`), reporting each
        complete result; a failure ends the child's share."""
        for i, result in self._arrived(lambda: block):
            results[i] = _reported(report, i, result)

    def drain_some(self, received: list[Any], wait: bool) -> None:
        """Append the messages that have come (waiting for one, or the end, with `wait`)."""
        for _, message in self._arrived(lambda: wait and not received):
            received.append(message)

    def _arrived(self, keep_reading: Callable[[], bool]) -> Iterator[tuple[int, Any]]:
        """(index, message) of each complete message, reading while keep_reading() or while
        data is there; the pipe's end or a failure message ends the child (`done`, `failure`)."""
        while not self.done and (keep_reading() or select.select([self.fd], [], [], 0)[0]):
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                self.done = True
                self.failure = self.failure or ("it ended with a partial message" if self.buffer else "")
            self.buffer += chunk
            for ok, i, message in self._messages():
                if not ok:
                    self.done, self.failure = True, message
                    return
                yield i, message

    def _messages(self):
        while len(self.buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buffer)
            if len(self.buffer) < _HEADER.size + size:
                return
            payload = bytes(self.buffer[_HEADER.size:_HEADER.size + size])
            del self.buffer[:_HEADER.size + size]
            yield pickle.loads(payload)

    def stop(self) -> None:
        """Kill the child if it still runs, and reap it."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        os.close(self.fd)


def _fork_children(fn: Callable[[T], R], items: Sequence[T], count: int) -> list[_Child]:
    children: list[_Child] = []
    try:
        for worker in range(1, count):
            children.append(_fork(lambda fd, worker=worker: _share(fn, items, worker, count, fd)))
    except BaseException:
        for child in children:
            child.stop()
        raise
    return children


def _fork(body: Callable[[int], int]) -> _Child:
    """A child running body(write end of its pipe) -> exit code, then os._exit: no handler,
    buffer or atexit hook of this process runs twice. It ignores SIGINT and forks no further."""
    read_fd, write_fd = os.pipe()
    gc.freeze()                # the child copies no page to scan what exists already
    try:
        pid = os.fork()
    finally:
        gc.unfreeze()
    if pid == 0:               # the child
        code = 1
        try:
            os.close(read_fd)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            os.environ[CHILD_ENV] = "1"
            _one_torch_thread()
            code = body(write_fd)
        finally:
            os._exit(code)
    os.close(write_fd)
    return _Child(pid, read_fd)


def _one_torch_thread() -> None:
    """In a child: torch (when this process had loaded it) on one intra-op thread. An OpenMP pool
    the parent started does not survive a fork, and the child's first parallel kernel would wait
    on it forever (torch's DataLoader workers do the same). Looked up, not imported: the planner
    core does not import torch."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _share(fn: Callable[[T], R], items: Sequence[T], worker: int, count: int, fd: int) -> int:
    """A shared_map child: its items, each result written as it comes; the first failure ends it."""
    write = partial(_write_all, fd)
    for i in range(worker, len(items), count):
        if not _send(write, i, lambda i=i: fn(items[i])):
            return 1
    return 0


def _send(write: Callable[[bytes], None], i: int, compute: Callable[[], Any]) -> bool:
    """Write (True, i, compute()), or (False, i, what went wrong); False on failure."""
    try:
        payload = pickle.dumps((True, i, compute()), pickle.HIGHEST_PROTOCOL)
    except Exception as error:
        write(_failure(i, error))
        return False
    write(_HEADER.pack(len(payload)) + payload)
    return True


def _failure(i: int, error: Exception) -> bytes:
    payload = pickle.dumps((False, i, f"{type(error).__name__}: {error}"))
    return _HEADER.pack(len(payload)) + payload


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


__all__ = ["MAX_WORKERS", "Background", "background", "shared_map", "usable_cpus", "worker_count"]
