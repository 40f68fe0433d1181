"""Launch a job on `nproc` ranks through torchrun, with a watchdog, and read back what it wrote.

    python -m torch.distributed.run --nproc-per-node=N [--standalone | rendezvous args]
                                    -m stratagem.runtime.worker JOB.json

PYTHONPATH is passed through, so workers import this copy of stratagem. Nothing hangs: gloo's
timeout bounds every collective (`timeout_s`), torchrun stops every rank once one fails, and the
watchdog stops torchrun and every rank after `timeout_s` + start-up; Ctrl-C or SIGTERM stops them
too and raises Interrupted (runtime.processes: nothing of a run outlives it). A failed run raises RunFailed
naming the rank and the cause: the rank's own report (`rank<r>.error.json`) when it wrote one, else
torchrun's record of its exit code and the last lines the rank wrote to stderr (torchrun tees every
rank's streams into `<out>/logs/<run>/attempt_0/<local rank>/`; a worker that aborts in C++ leaves
the exception's `what()` there, and faulthandler's Python stack of every thread).

A run whose root cause is a rank killed by a signal (a crash outside Python: a C++ abort in the
transport, the OOM killer) can be launched again, `relaunches` times, from scratch: a rank's own
exception never is (it would fail the same way). The result names every failed attempt. Single
node only; multi-node jobs have torchrun's own --max-restarts.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stratagem.errors import ConfigError
from stratagem.files import atomic_write_json
from stratagem.runtime.errors import RunFailed
from stratagem.runtime.processes import MARKER_ENV, Completed, new_marker, run_tree

STARTUP_S = 60.0          # torchrun, imports and process-group rendezvous


@dataclass(frozen=True)
class LaunchOptions:
    nproc: int
    timeout_s: float = 300.0
    torchrun_args: tuple[str, ...] = ()        # --nnodes, --rdzv-endpoint, ... (multi-node)
    env: Mapping[str, str] = field(default_factory=dict)
    backend: str = "auto"
    threads: int = 1
    relaunches: int = 0                        # after a rank killed by a signal (single node)


@dataclass(frozen=True)
class LaunchResult:
    out_dir: Path
    results: dict[str, dict[str, Any]]        # task name -> what rank 0 wrote
    output: str                               # torchrun's stdout and stderr
    failed_attempts: tuple[str, ...] = ()     # why each relaunched attempt failed


def launch(tasks: Sequence[Mapping[str, Any]], options: LaunchOptions, out_dir: str | Path | None = None
           ) -> LaunchResult:
    if options.relaunches < 0:
        raise ConfigError("relaunches must not be negative", expected="0 or more", got=str(options.relaunches))
    if options.relaunches and options.torchrun_args:
        raise ConfigError("relaunching is for single-node runs", expected="relaunches=0 with rendezvous arguments",
                          got=f"relaunches={options.relaunches}", hint="Pass --max-restarts to torchrun instead")
    out = Path(out_dir or tempfile.mkdtemp(prefix="stratagem-run-"))
    out.mkdir(parents=True, exist_ok=True)
    job = {"out_dir": str(out), "timeout_s": options.timeout_s, "backend": options.backend,
           "threads": options.threads, "tasks": list(tasks)}
    job_path = out / "job.json"
    atomic_write_json(job_path, job)
    failed: list[str] = []
    while True:
        for stale in out.glob("rank*.error.json"):
            stale.unlink()
        completed = _run(torchrun_command(job_path, options, out / "logs"), options)
        code, output = completed.code, completed.output
        if code == 0:
            break
        summary = failure_summary(out, output, code, options, completed.stopped_ranks)
        if len(failed) >= options.relaunches or not killed_by_signal(summary):
            raise RunFailed(summary + "".join(f" (after attempt {i + 1} failed: {f})" for i, f in enumerate(failed)))
        failed.append(summary)
    results = {t["name"]: json.loads((out / f"{t['name']}.json").read_text()) for t in tasks}
    return LaunchResult(out, results, output, tuple(failed))


def killed_by_signal(summary: str) -> bool:
    """Whether the root cause (the summary's first clause) is a rank that died of a signal."""
    first = summary.split(": ", 1)[-1].split("; ", 1)[0]
    return bool(re.match(r"rank \d+ died without a report \(killed by signal \d+\)", first))


def torchrun_command(job_path: Path, options: LaunchOptions, log_dir: Path) -> list[str]:
    rendezvous = list(options.torchrun_args) or ["--standalone"]
    per_node = options.nproc // _nodes(options.torchrun_args)
    return [sys.executable, "-m", "torch.distributed.run", *rendezvous, f"--nproc-per-node={per_node}",
            "--max-restarts=0", f"--log-dir={log_dir}", "--tee=3",
            "-m", "stratagem.runtime.worker", str(job_path)]


def _nodes(args: Sequence[str]) -> int:
    for i, arg in enumerate(args):
        if arg.startswith("--nnodes"):
            value = arg.split("=", 1)[1] if "=" in arg else args[i + 1]
            return int(value.split(":")[-1])
    return 1


def _run(command: list[str], options: LaunchOptions) -> Completed:
    env = {**os.environ, **options.env, "PYTHONPATH": _pythonpath(), MARKER_ENV: new_marker()}
    return run_tree(command, env, options.timeout_s + STARTUP_S)


def _pythonpath() -> str:
    here = str(Path(__file__).resolve().parents[2])
    parts = [here, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    return os.pathsep.join(dict.fromkeys(parts))


_CONSEQUENCE = re.compile(r"gloo|NCCL|Connection (closed|reset)|Timed out waiting|timed out", re.I)


def failure_summary(out: Path, output: str, code: int, options: LaunchOptions,
                    stopped_ranks: tuple[int, ...] = ()) -> str:
    """Root causes first: ranks found stopped (SIGSTOP) when the watchdog fired, a rank's own
    exception, then ranks that died silently, then ranks whose collectives failed because a peer
    was gone or hung."""
    reports = [json.loads(p.read_text()) for p in sorted(out.glob("rank*.error.json"))]
    causes = [r for r in reports if not _CONSEQUENCE.search(r["error"])]
    waiting = [r for r in reports if _CONSEQUENCE.search(r["error"])]
    lines = [f"rank {r} was stopped (SIGSTOP or a debugger: process state T) and never finished"
             for r in stopped_ranks]
    lines.extend(_reported(r) for r in causes)
    quiet = {r["rank"] for r in reports} | set(stopped_ranks)
    lines.extend(_torchrun_failures(output, quiet, out / "logs", watchdog=code == -1))
    lines.extend(_reported(r) + " (a collective with a failed or hung peer)" for r in waiting)
    if code == -1:
        lines.append(f"the watchdog stopped the run after {options.timeout_s + STARTUP_S:.0f} s")
    if not lines:
        lines.append(f"torchrun exited with code {code}; its output ends:\n" + "\n".join(output.splitlines()[-15:]))
    return f"run on {options.nproc} ranks failed: " + "; ".join(lines)


def _reported(r: dict[str, Any]) -> str:
    where = f" in task {r['task']!r}" if r.get("task") else ""
    where += f" at step {r['step']}" if r.get("step") is not None else ""
    return f"rank {r['rank']} failed{where}: {r['error']}"


_FAILURE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)\s*\n\s*exitcode\s*:\s*(-?\d+)"
                      r"(?:\s*\(pid: \d+\))?", re.S)
STDERR_TAIL_LINES = 20


def _torchrun_failures(output: str, reported: set[int], log_dir: Path, watchdog: bool = False) -> list[str]:
    """Ranks torchrun saw die without a report of their own (os._exit, a signal, a crash), with the
    end of their stderr, before the ones it stopped itself once another had failed. After the
    watchdog fired, every rank's end is the watchdog's stop, not a cause."""
    if watchdog:
        return []
    died, stopped = [], []
    for rank, local_rank, code in _FAILURE.findall(output):
        if int(rank) in reported:
            continue
        if int(code) == -15:
            stopped.append(f"rank {rank} was stopped by torchrun (SIGTERM) before it reported anything")
        else:
            cause = f"killed by signal {-int(code)}" if int(code) < 0 else f"exit code {code}"
            tail = stderr_tail(log_dir, int(local_rank))
            died.append(f"rank {rank} died without a report ({cause})"
                        + (f"; its stderr ends:\n{tail}\n" if tail else ""))
    return died + stopped


def stderr_tail(log_dir: Path, local_rank: int, num_lines: int = STDERR_TAIL_LINES) -> str:
    """The last non-blank lines a local rank wrote to stderr in this launch ('' if none)."""
    logs = sorted(log_dir.glob(f"*/attempt_*/{local_rank}/stderr.log"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return ""
    lines = [line for line in logs[-1].read_text(errors="replace").splitlines()
             if line.strip() and not line.startswith("Extension modules:")]
    return "\n".join(lines[-num_lines:])
