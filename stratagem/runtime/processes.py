"""A launched process tree that never outlives its run: torchrun and every rank it starts.

torchrun is started in a session of its own, and starts each rank in a session of its own too
(torch.distributed.elastic's subprocess handler), so neither a terminal's Ctrl-C nor a kill of one
process group reaches them all. Every process of a run therefore carries a marker in its
environment (`MARKER_ENV` = a fresh id; children inherit it), and the run ends like this:

    SIGINT or SIGTERM to this process  ->  stop(): SIGTERM to torchrun's group (it stops its ranks),
                                           after `GRACE_S` SIGKILL to torchrun and to every process
                                           still carrying the marker; then Interrupted (exit 128 + n)
    every POLL_S while it runs          ->  the ranks' states are read: a rank seen stopped (SIGSTOP)
                                           is named as stopped, not as killed by whoever ended it
    the watchdog's deadline passes     ->  stop()
    torchrun exits                     ->  its code and output

`marked(marker)` finds a run's processes by reading /proc/<pid>/environ (Linux); elsewhere only
torchrun's own group is signalled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from stratagem.runtime.errors import RunFailed

MARKER_ENV = "STRATAGEM_RUN_ID"
GRACE_S = 10.0            # torchrun's own shutdown of its ranks, before SIGKILL
GONE_S = 5.0              # how long to wait for killed processes to disappear
POLL_S = 1.0              # how often the ranks' states are read while a run goes on
SIGNAL_NAMES = {signal.SIGINT: "SIGINT (Ctrl-C)", signal.SIGTERM: "SIGTERM"}


class Interrupted(RunFailed):
    """The run was ended by a signal to this process; every process of the run was stopped."""

    def __init__(self, signum: int, stopped: int):
        name = SIGNAL_NAMES.get(signum, f"signal {signum}")
        super().__init__(f"run interrupted by {name}", got=f"{stopped} processes of the run stopped",
                         hint="nothing of the run is left running")
        self.exit_code = 128 + signum


@dataclass(frozen=True)
class MarkedProcess:
    pid: int
    rank: int | None          # its RANK, for a torchrun worker
    state: str                # /proc/<pid>/stat's state letter: R, S, T (stopped), Z, ...


@dataclass(frozen=True)
class Completed:
    code: int                 # torchrun's exit code; -1 when the watchdog ended the run
    output: str
    stopped_ranks: tuple[int, ...] = ()     # ranks seen stopped (state T: SIGSTOP, a debugger) meanwhile


class _Signalled(BaseException):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def new_marker() -> str:
    return uuid.uuid4().hex


def run_tree(command: Sequence[str], env: Mapping[str, str], timeout_s: float) -> Completed:
    """Run `command` (with `env`, which must carry MARKER_ENV) until it exits or `timeout_s`
    passes, noting every `POLL_S` which ranks are stopped; a SIGINT or SIGTERM meanwhile stops the
    whole tree and raises Interrupted."""
    marker = env[MARKER_ENV]
    process = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=dict(env), start_new_session=True)
    deadline, stopped = time.monotonic() + timeout_s, set()
    try:
        with _signals_raise():
            while True:
                try:
                    output, _ = process.communicate(timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))
                    return Completed(process.returncode, output, tuple(sorted(stopped)))
                except subprocess.TimeoutExpired:
                    stopped |= {p.rank for p in marked(marker) if p.state == "T" and p.rank is not None}
                    if time.monotonic() >= deadline:
                        break
        stop(process, marker)
        output, _ = process.communicate()
        return Completed(-1, output, tuple(sorted(stopped)))
    except _Signalled as signalled:
        count = stop(process, marker)
        process.communicate()
        raise Interrupted(signalled.signum, count) from None
    except BaseException:
        stop(process, marker)
        raise


def stop(process: subprocess.Popen, marker: str) -> int:
    """Stop torchrun and every process carrying `marker`; the number of processes that were running."""
    running = {p.pid for p in marked(marker)} | ({process.pid} if process.poll() is None else set())
    _signal_group(process.pid, signal.SIGTERM)
    _wait(lambda: process.poll() is not None and not marked(marker), GRACE_S)
    _signal_group(process.pid, signal.SIGKILL)
    for p in marked(marker):
        _signal(p.pid, signal.SIGKILL)
    _wait(lambda: not [p for p in marked(marker) if p.state != "Z"], GONE_S)
    return len(running)


def marked(marker: str) -> list[MarkedProcess]:
    """Live processes whose environment carries MARKER_ENV=marker (not this one)."""
    needle = f"{MARKER_ENV}={marker}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        pid = int(entry.name)
        if pid == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ:
            found.append(MarkedProcess(pid, _rank(environ), state))
    return found


def _rank(environ: list[bytes]) -> int | None:
    for item in environ:
        if item.startswith(b"RANK="):
            value = item[5:].decode(errors="replace")
            return int(value) if value.isdigit() else None
    return None


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _wait(done, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)


@contextmanager
def _signals_raise():
    """SIGINT and SIGTERM raise _Signalled in the main thread while a run is under way."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_signalled(signum, _frame):
        raise _Signalled(signum)

    previous = {s: signal.signal(s, raise_signalled) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
