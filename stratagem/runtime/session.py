"""`stratagem run` and `stratagem validate` in one call: refuse, launch, measure, compare.

    run_plans(paths, options)  ->  one report per plan (a dict, written as run.json)

Before anything is launched: every plan must be runnable (runtime.runnable) and rebuildable (a zoo
model, runtime.training), and its device count must match the ranks. One torchrun launch runs all
the plans (a task each). Per plan the report has the losses, the measured iteration time (median of
the steps after `warmup`; each step's time is the slowest rank's) and peak memory per rank
(runtime.memory), the plan's predictions beside them with the relative errors
(measured - predicted) / measured, and, with `check`, the comparison with a single-process run of
the same module, weights, data and optimizer (runtime.compare); for a pipeline plan, on the global
batch of m micro-batches (runtime.stages).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stratagem import values
from stratagem.errors import ConfigError
from stratagem.files import writable_directory
from stratagem.plan import Plan
from stratagem.planfile import load_plan
from stratagem.runtime.errors import NotRunnable
from stratagem.runtime.launch import LaunchOptions, launch
from stratagem.runtime.runnable import require_runnable

DTYPES = ("float32", "float64")          # what a run may train in (float64: the same-training check)
MEMORY_MEANING = ("largest total of live tensor storage bytes on the rank during the second step "
                  "(the first with optimizer state; the first step when only one runs) "
                  "(torch.distributed._tools.MemTracker: parameters, gradients, optimizer states, "
                  "activations, temporaries; no allocator caching, Python objects or gloo buffers)")


@dataclass(frozen=True)
class RunOptions:
    """How to run: every value checked on construction (stratagem.values), for the CLI and the API
    alike. `warmup`: steps left out of the timing, fewer than `steps`; None: 1 when steps > 1, else 0."""
    steps: int = 5
    warmup: int | None = None
    check: bool = False
    lr: float = 1e-3
    seed: int = 0
    nproc: int | None = None
    timeout_s: float = 300.0
    torchrun_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    out_dir: str | None = None
    relaunches: int = 0                 # launch again after a rank is killed by a signal (launch.py)
    dtype: str | None = None            # floating-point dtype trained in; None: float64 with check, else float32
    checkpoint_dir: str | None = None   # save model, optimizer and step here after the last step
    resume: str | None = None           # a checkpoint to start from (its step, weights, optimizer state)
    op_time_steps: int = 0              # steps more, after the timed ones, with per-op timing (runtime.op_timing)
    max_grad_norm: float | None = None  # clip gradients to this global L2 norm before each step

    def __post_init__(self) -> None:
        dtype = self.dtype or ("float64" if self.check else "float32")
        object.__setattr__(self, "dtype", values.one_of(dtype, "training dtype", DTYPES))
        steps = values.integer(self.steps, "steps")
        warmup = min(1, steps - 1) if self.warmup is None else self.warmup
        object.__setattr__(self, "warmup", values.integer(warmup, f"warmup (of {steps} steps)", 0, steps - 1))
        if self.nproc is not None:
            values.integer(self.nproc, "nproc")
        values.non_negative(self.lr, "learning rate")
        values.integer(self.seed, "seed", minimum=0)
        values.positive(self.timeout_s, "timeout (seconds)")
        values.integer(self.relaunches, "relaunches", minimum=0)
        values.integer(self.op_time_steps, "steps with per-op timing", minimum=0)
        if self.max_grad_norm is not None:
            values.positive(self.max_grad_norm, "gradient norm to clip to")
        if self.resume and self.check:
            raise ConfigError("--check compares with a run from step 0", expected="--check or --resume",
                              got="both", hint="Check a plan on a fresh run, then resume without --check")


def run_plans(paths: Sequence[str | Path], options: RunOptions) -> list[dict[str, Any]]:
    """Run every plan (a plan file, or `frontier.json:INDEX`) in one launch; a report each."""
    plans = [load_plan(str(p)) for p in paths]
    nproc = _checked(plans, options)
    out = Path(options.out_dir or tempfile.mkdtemp(prefix="stratagem-run-"))
    for i, plan in enumerate(plans):          # the workers read each plan from its own file
        plan.save(out / f"plan{i}.plan.json")
    tasks = [{"name": f"plan{i}", "plan": str((out / f"plan{i}.plan.json").resolve()), "steps": options.steps,
              "warmup": options.warmup, "lr": options.lr, "seed": options.seed, "save_params": options.check,
              "max_grad_norm": options.max_grad_norm,
              "dtype": options.dtype, "op_time_steps": options.op_time_steps, **_checkpointing(options)}
             for i, p in enumerate(paths)]
    result = launch(tasks, LaunchOptions(nproc, options.timeout_s, options.torchrun_args, options.env,
                                         relaunches=options.relaunches), out)
    return [{**report(plan, str(path), result.results[t["name"]], result.out_dir / f"{t['name']}.params.pt",
                      options), "failed_attempts": list(result.failed_attempts)}
            for plan, path, t in zip(plans, paths, tasks)]


def _checkpointing(options: RunOptions) -> dict[str, str]:
    keys = {"save_checkpoint": options.checkpoint_dir, "load_checkpoint": options.resume}
    return {k: str(Path(v).resolve()) for k, v in keys.items() if v}


def _checked(plans: Sequence[Plan], options: RunOptions) -> int:
    from stratagem.runtime.training import training_spec
    sizes = {p.num_devices for p in plans}
    if len(sizes) != 1:
        raise NotRunnable("plans for different device counts cannot share one launch",
                          got=str(sorted(sizes)), hint="Run them one device count at a time")
    nproc = options.nproc or sizes.pop()
    for plan in plans:
        if plan.num_devices != nproc:
            raise NotRunnable("--nproc does not match the plan", expected=f"{plan.num_devices} processes",
                              got=str(nproc), hint="A plan runs on exactly the devices it was made for")
        require_runnable(plan)
        training_spec(plan, options.lr, options.seed, options.dtype)
    if (options.checkpoint_dir or options.resume) and len(plans) > 1:
        raise NotRunnable("checkpoints are for one plan at a time", got=f"{len(plans)} plans",
                          hint="Run the plan to checkpoint alone with `stratagem run`")
    writable_directory(options.checkpoint_dir, "checkpoint directory")
    if options.resume:
        from stratagem.runtime import checkpoint
        checkpoint.check(options.resume, plans[0])
    return nproc


def timed_steps(times: list[float], warmup: int, memory_step: int | None) -> list[float]:
    """The step times after `warmup`, but the step whose memory was tracked (MemTracker slows it),
    unless it is the only one left."""
    timed = [t for i, t in enumerate(times) if i >= warmup and i != memory_step]
    return timed or times[warmup:]


def report(plan: Plan, path: str, measured: dict[str, Any], params_path: Path, options: RunOptions
           ) -> dict[str, Any]:
    times = measured["step_times_s"]
    timed = timed_steps(times, options.warmup, measured.get("memory_step"))
    iteration = statistics.median(timed)
    peaks = [p["num_bytes"] if p else None for p in measured["peak_memory"]]
    largest = max((p for p in peaks if p is not None), default=float("nan"))
    out = {"plan": path, "model": plan.model or plan.graph.name, "algorithm": plan.algorithm,
           "cluster": plan.cluster, "world_size": measured["world_size"], "steps": len(times),
           "losses": measured["losses"], "step_times_s": times, "iteration_time_s": iteration,
           "predicted_iteration_time_s": plan.iteration_time_s,
           "time_rel_error": relative_error(iteration, plan.iteration_time_s),
           "peak_memory_bytes": peaks, "peak_memory_bytes_max": largest,
           "predicted_peak_memory_bytes": plan.peak_memory_bytes,
           "predicted_peak_memory_per_device": measured.get("predicted_peak_memory_per_device"),
           "memory_rel_error": relative_error(largest, plan.peak_memory_bytes),
           "peak_memory_meaning": MEMORY_MEANING,
           "peak_memory_by_kind": [p["by_kind"] if p else None for p in measured["peak_memory"]]}
    if "op_times" in measured:
        out["op_times"] = measured["op_times"]
    if options.check:
        out["check"] = check(plan, measured["losses"], params_path, options)
        out["max_rel_loss_diff"] = out["check"]["max_rel_loss_diff"]
    return out


def check(plan: Plan, losses: list[float], params_path: Path, options: RunOptions) -> dict[str, Any]:
    """The run against one process (runtime.compare): what the workers saved beside `params_path`
    (<task>.params.pt, .gradients.pt, .buffers.pt) against a reference run here."""
    import torch

    from stratagem.runtime.compare import compare
    from stratagem.runtime.stages import rounding_steps_of
    from stratagem.runtime.training import reference_run, training_spec
    spec = training_spec(plan, options.lr, options.seed, options.dtype, options.max_grad_norm)
    reference = reference_run(spec, len(losses))
    saved = {kind: params_path.with_name(params_path.name.replace(".params.", f".{kind}."))
             for kind in ("params", "gradients", "buffers")}
    loaded = {kind: torch.load(path) if path.exists() else None for kind, path in saved.items()}
    out = compare(plan.graph, losses, reference, loaded["gradients"], loaded["params"], loaded["buffers"],
                  rounding_steps_of(plan)).to_dict()
    out["reference_losses"] = reference.losses
    return out


def relative_error(measured: float, predicted: float) -> float:
    return (measured - predicted) / measured if measured else float("nan")
