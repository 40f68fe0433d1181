"""One torchrun rank: `python -m stratagem.runtime.worker JOB.json` (launched by runtime.launch).

A job runs several tasks in one launch (torchrun's start-up costs seconds). Each task trains a zoo
model under a plan for some steps and writes `<out>/<task>.json` (rank 0): the loss of every step,
each step's time (the slowest rank's; the first `warmup` steps are not timed), every rank's peak
memory (runtime.memory, measured during the second step, once the optimizer has state, or the
first when it is the only one; `memory_step` says which, and that step is not timed), and, if
asked, the final parameters
(`<task>.params.pt`, whole tensors) and a checkpoint. A rank that fails writes
`<out>/rank<r>.error.json` (the task, the step, the exception) before exiting non-zero, so the
launcher can name it; a rank killed by a signal (a C++ abort in a collective) prints the Python stack
of every thread to stderr first (faulthandler), which the launcher quotes.
`STRATAGEM_FAULT=rank:step:raise|exit|hang|abort|abort-once|stop` injects a failure (tests; abort-once
aborts the first launch of the job only, for relaunches; stop sends the rank SIGSTOP).
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import signal
import sys
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from stratagem.files import atomic_write_json
from stratagem.plan import Plan

FAULT_ENV = "STRATAGEM_FAULT"


def main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    out = Path(job["out_dir"])
    rank = int(os.environ.get("RANK", 0))
    where: dict[str, Any] = {"task": None, "step": None}
    faulthandler.enable(all_threads=True)
    try:
        meshes = _init(job)
        for task in job["tasks"]:
            where.update(task=task["name"], step=None)
            run_task(task, out, where, meshes)
        dist.barrier()
        dist.destroy_process_group()
        return 0
    except BaseException as error:   # noqa: BLE001 - reported, then re-raised as an exit code
        _report_error(out, rank, where, error)
        raise


def _init(job: dict[str, Any]):
    """The process group, and the mesh book every task of the job shares."""
    from stratagem.runtime.meshes import MeshBook
    backend = job.get("backend", "auto")
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        torch.set_default_device(f"cuda:{local}")
    torch.set_num_threads(int(job.get("threads", 1)))
    dist.init_process_group(backend, timeout=timedelta(seconds=float(job.get("timeout_s", 120))))
    return MeshBook((), dist.get_world_size(), "cuda" if backend == "nccl" else "cpu")


def run_task(task: dict[str, Any], out: Path, where: dict[str, Any], meshes=None) -> None:
    from stratagem.runtime import checkpoint
    from stratagem.runtime.execute import parallelize
    from stratagem.runtime.training import (
        batch,
        build_module,
        make_optimizer,
        training_spec,
    )

    plan = Plan.load(task["plan"])
    spec = training_spec(plan, lr=task.get("lr", 1e-3), seed=task.get("seed", 0),
                         dtype=task.get("dtype", "float32"), max_grad_norm=task.get("max_grad_norm"))
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else None
    model = parallelize(build_module(spec), plan, device, meshes)
    optimizer = make_optimizer(spec.optimizer, model.parameters(), spec.lr, spec.max_grad_norm,
                               getattr(model, "sum_over_stages", None))
    start = checkpoint.load(model, optimizer, task["load_checkpoint"]) if task.get("load_checkpoint") else 0
    losses, times, peak, gradients = [], [], None, {}
    keep = (lambda named: gradients.update(_whole_gradients(model, named))) if task.get("save_params") else None
    measured = start + 1 if task["steps"] >= 2 else start     # a steady step: the optimizer has state
    for s in range(start, start + task["steps"]):
        where["step"] = s
        _maybe_fault(s, out)
        inputs = shard_of(model, batch(spec, s))
        dist.barrier()
        seen = keep if s == start else None
        if s == measured and task.get("memory", True) and seen is None:    # gathering gradients is no step's memory
            loss, time_s, peak = _measured_step(model, optimizer, inputs, seen)
        else:
            loss, time_s = _timed_step(model, optimizer, inputs, seen)
        losses.append(loss)
        times.append(time_s)
    where["step"] = None
    op_times = _op_timed_steps(task, model, optimizer, spec, start + task["steps"], device, where)
    if task.get("save_checkpoint"):
        checkpoint.save(model, optimizer, task["save_checkpoint"], start + task["steps"])
    _write_results(task, out, plan, model, losses, times, peak, gradients, op_times,
                   measured - start if peak is not None else None)


def shard_of(model, inputs) -> tuple:
    """What this rank reads of each input (PlanModule.input_boxes): each rank is handed only its
    shard of the batch, as a data loader per rank would (a pipeline stage: of the inputs it reads,
    runtime.pipeline)."""
    if hasattr(model, "shard_of"):
        return model.shard_of(inputs)
    boxes = model.input_boxes()
    return tuple(x[tuple(slice(a, b) for a, b in boxes[name])].contiguous()
                 for name, x in zip(model.plan.graph.inputs, inputs))


def _op_timed_steps(task, model, optimizer, spec, first: int, device, where) -> dict | None:
    """`task["op_time_steps"]` more steps with per-op timing on (runtime.op_timing), after the
    timed ones so that their times are not perturbed; every rank's per-op times."""
    from stratagem.runtime.op_timing import OpTimer
    from stratagem.runtime.training import batch
    count = int(task.get("op_time_steps", 0))
    if count < 1:
        return None
    model.timer = OpTimer(device)
    for s in range(first, first + count):
        where["step"] = s
        inputs = shard_of(model, batch(spec, s))
        dist.barrier()
        model.timer.begin_step()
        _timed_step(model, optimizer, inputs)
        model.timer.end_step()
    where["step"] = None
    reports: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(reports, model.timer.report())
    model.timer = None
    return {"ranks": reports}


def _whole_gradients(model, named) -> dict[str, torch.Tensor]:
    """Every parameter's gradient, whole (collective: every rank calls it)."""
    from stratagem.runtime.training import whole
    return _every_stage(model, {n: whole(p.grad) for n, p in named.items() if p.grad is not None})


def _every_stage(model, found: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Whole tensors of every stage of a pipeline plan (a collective), else `found` itself."""
    return model.from_every_stage(found) if hasattr(model, "from_every_stage") else found


def _timed_step(model, optimizer, inputs, on_gradients=None) -> tuple[float, float]:
    from stratagem.runtime.training import train_step
    _sync()
    begin = time.perf_counter()
    loss = train_step(model, optimizer, inputs, on_gradients)
    _sync()
    return loss, time.perf_counter() - begin


def _measured_step(model, optimizer, inputs, on_gradients=None):
    from stratagem.runtime.memory import tracked
    with tracked(model, optimizer) as peak:
        loss, time_s = _timed_step(model, optimizer, inputs, on_gradients)
    return loss, time_s, peak


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _write_results(task, out: Path, plan: Plan, model, losses, times, peak, gradients, op_times=None,
                   memory_step: int | None = None) -> None:
    from stratagem.runtime.training import whole
    slowest = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    peaks: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(peaks, None if peak is None else {"num_bytes": peak.num_bytes, "by_kind": peak.by_kind})
    params = buffers = None
    if task.get("save_params"):
        params = _every_stage(model, {name: whole(p) for name, p in model.named_parameters()})
        buffers = _every_stage(model, {name: whole(b) for name, b in model.named_buffers()})
    if dist.get_rank() != 0:
        return
    if params is not None:
        torch.save(params, out / f"{task['name']}.params.pt")
        torch.save(gradients, out / f"{task['name']}.gradients.pt")
        torch.save(buffers, out / f"{task['name']}.buffers.pt")
    atomic_write_json(out / f"{task['name']}.json", {
        "task": task["name"], "plan": task["plan"], "world_size": dist.get_world_size(),
        "losses": losses, "step_times_s": slowest.tolist(), "warmup": task.get("warmup", 1),
        "memory_step": memory_step,
        "peak_memory": peaks, "predicted_iteration_time_s": plan.iteration_time_s,
        "predicted_peak_memory_bytes": plan.peak_memory_bytes,
        "predicted_peak_memory_per_device": plan.details.get("peak_memory_per_device"),
        **({"op_times": op_times} if op_times is not None else {}),
    })


def _maybe_fault(step: int, out: Path) -> None:
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    rank, at, mode = spec.split(":")
    if int(rank) != dist.get_rank() or int(at) != step:
        return
    if mode == "exit":
        os._exit(13)
    if mode == "hang":
        time.sleep(3600)
    if mode == "abort-once":
        fired = out / "fault.fired"
        if fired.exists():
            return
        fired.touch()
        mode = "abort"
    if mode == "abort":
        print(f"injected abort ({FAULT_ENV}={spec})", file=sys.stderr, flush=True)
        os.abort()
    if mode == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
        return
    raise RuntimeError(f"injected fault ({FAULT_ENV}={spec})")


def _report_error(out: Path, rank: int, where: dict[str, Any], error: BaseException) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / f"rank{rank}.error.json", {
            "rank": rank, "task": where.get("task"), "step": where.get("step"),
            "error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc(limit=8)})
    except OSError:
        pass


def exit_now(code: int) -> None:
    """Leave without the interpreter's teardown. Everything is written and the process group is
    destroyed by then; tearing down torch's C++ objects at exit can still abort the process
    ("terminate called without an active exception", SIGABRT, seen on gloo ranks under load), which
    torchrun would report as a failed run."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main(sys.argv[1]))
