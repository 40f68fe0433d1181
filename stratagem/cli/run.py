"""`stratagem run plan.json [--steps N] [--nproc N] [--check] [-o run.json]`: train under a plan.

Launches one process per device through torchrun (gloo on CPU, NCCL on GPU); multi-node runs take
torchrun's rendezvous arguments (--nnodes, --node-rank, --rdzv-endpoint, --rdzv-id, --rdzv-backend),
passed through. A plan the runtime cannot execute is refused before anything starts, naming each op
and why. --check compares losses and parameters with a single-process run of the same module,
weights, data and optimizer. The report (-o) has the measured iteration time and peak memory per rank
beside the plan's predictions. Torch is imported only when a run starts.
"""

from __future__ import annotations

import argparse
import json
import math

from stratagem.files import atomic_write_json

RENDEZVOUS = ("--nnodes", "--node-rank", "--rdzv-endpoint", "--rdzv-id", "--rdzv-backend", "--master-addr",
              "--master-port")


# (argument, what it is, suffixes its writer can produce): checked before any work (cli.main)
OUTPUTS = (("output", "run report", ()),)

def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("plan", help="a plan file written by `stratagem plan -o`")
    add_run_arguments(parser, steps=5)
    parser.add_argument("--check", action="store_true",
                        help="compare with a single-process run of the same module, weights, data and optimizer: "
                             "losses, first-step gradients and final parameters, within bounds derived from the "
                             "computation (runs both in float64 unless --dtype says otherwise)")
    parser.add_argument("-o", "--output", help="write the report (JSON) here")
    parser.add_argument("--checkpoint-dir", default=None, metavar="DIR",
                        help="after the last step, save weights, optimizer state and step here "
                             "(torch.distributed.checkpoint; another plan or rank count can resume from it)")
    parser.add_argument("--resume", default=None, metavar="DIR",
                        help="start from the checkpoint in DIR (checked against the plan before anything launches)")


def add_run_arguments(parser: argparse.ArgumentParser, steps: int) -> None:
    parser.add_argument("--steps", type=int, default=steps, help="training steps")
    parser.add_argument("--warmup", type=int, default=None,
                        help="steps left out of the timing, fewer than --steps (default: 1, or 0 with --steps 1)")
    parser.add_argument("--nproc", type=int, default=None, help="processes (default: the plan's devices)")
    parser.add_argument("--lr", type=float, default=1e-3, help="learning rate of the plan's optimizer")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and the batches")
    parser.add_argument("--clip-grad-norm", type=float, default=None, metavar="NORM",
                        help="clip gradients to this global L2 norm before each step (across shards)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds before a hung collective or run is stopped")
    parser.add_argument("--relaunch", type=int, default=0, metavar="N",
                        help="launch again, up to N times, when a rank is killed by a signal (a crash "
                             "outside Python); a rank's own exception is never retried (single node)")
    parser.add_argument("--dtype", choices=("float32", "float64"), default=None,
                        help="floating-point dtype to train in (default: float32, float64 with --check)")
    for flag in RENDEZVOUS:
        parser.add_argument(flag, default=None, help="passed to torchrun")


def run_options(args: argparse.Namespace, check: bool):
    from stratagem.runtime.session import RunOptions
    passed = []
    for flag in RENDEZVOUS:
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            passed.append(f"{flag}={value}")
    return RunOptions(steps=args.steps, warmup=args.warmup, check=check, lr=args.lr, seed=args.seed,
                      max_grad_norm=getattr(args, "clip_grad_norm", None),
                      nproc=args.nproc, timeout_s=args.timeout, torchrun_args=tuple(passed),
                      relaunches=args.relaunch, dtype=args.dtype,
                      checkpoint_dir=getattr(args, "checkpoint_dir", None), resume=getattr(args, "resume", None))


def run(args: argparse.Namespace) -> int:
    from stratagem.runtime.session import run_plans
    report = run_plans([args.plan], run_options(args, args.check))[0]
    print(summary(report))
    if args.output:
        atomic_write_json(args.output, report)
        print(f"wrote {args.output}")
    return 0 if "check" not in report or report["check"]["same_training"] else 1


def summary(report: dict) -> str:
    losses = ", ".join(f"{x:.6g}" for x in report["losses"])
    lines = [f"{report['model']} under {report['algorithm'] or 'a plan'} on {report['world_size']} ranks, "
             f"{report['steps']} steps; losses: {losses}",
             f"iteration time {ms(report['iteration_time_s'])} (predicted {ms(report['predicted_iteration_time_s'])}); "
             f"peak memory {mib(report['peak_memory_bytes_max'])} on the fullest rank "
             f"(predicted {mib(report['predicted_peak_memory_bytes'])})"]
    if "check" in report:
        c = report["check"]
        verdict = "the same training" if c["same_training"] else "NOT the same training"
        lines.append(f"check against one process in {c['dtype']}: {verdict} (loss rel. diff "
                     f"{c['max_rel_loss_diff']:.2e}, {c['loss_diff_over_tolerance']:.2g}x its bound; "
                     f"gradients {_diff(c['max_grad_diff'], c['grad_tolerance'])}; "
                     f"parameters {_diff(c['max_param_diff'], c['param_tolerance'])})")
    for i, failure in enumerate(report.get("failed_attempts") or ()):
        lines.append(f"relaunched after attempt {i + 1} failed: {failure.splitlines()[0]}")
    return "\n".join(lines)


def _diff(value: float | None, bound: float) -> str:
    return "-" if value is None else f"max |diff| {value:.2e} against {bound:.2e}"


def ms(seconds: float) -> str:
    return "-" if seconds is None or math.isnan(seconds) else f"{seconds * 1e3:.2f} ms"


def mib(num_bytes: float) -> str:
    return "-" if num_bytes is None or math.isnan(num_bytes) else f"{num_bytes / 2**20:.2f} MiB"


def dumps(report: dict) -> str:
    return json.dumps(report, indent=1)
