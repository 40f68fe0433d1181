"""`stratagem plan MODEL`: find a strategy for a zoo model on a cluster and write it as a plan file.

    stratagem plan transformer                                # v100-2x8, all 16 devices, mini-time
    stratagem plan transformer --devices 8 --memory-cap 14.5GiB -o plan.json
    stratagem plan wideresnet --mode profiling                # devices -> least time that fits
    stratagem plan rnnlm --algorithm mcmc --budget-s 30 --seed 1

On a terminal, each phase of the search shows as a bar (nothing when piped). Ctrl-C stops the
search and writes the best plan found so far, saying so (exit code as usual: 0 when it fits);
Ctrl-C again aborts at once (130), writing nothing.
"""

from __future__ import annotations

import argparse

from stratagem.cli.stopping import first_ctrl_c_stops
from stratagem.errors import ConfigError
from stratagem.ir import PRECISIONS
from stratagem.plan import Plan
from stratagem.report import planning
from stratagem.report.console import Console
from stratagem.report.plan_summary import plan_lines, profile_table
from stratagem.report.planning import DEFAULT_CLUSTER, PlanRequest
from stratagem.search.context import memory_cap
from stratagem.search.progress import phase
from stratagem.search.registry import ALGORITHMS
from stratagem.values import size_bytes

ALGORITHM_HELP = "search by name (default ft): " + "; ".join(f"{a.name}: {a.summary}" for a in ALGORITHMS.values())


# (argument, what it is, suffixes its writer can produce): checked before any work (cli.main)
OUTPUTS = (("output", "plan file", ()),)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="a model zoo name (`stratagem models` lists them)")
    parser.add_argument("--cluster", default=None,
                        help=f"a preset name or a cluster YAML/JSON file (default: {DEFAULT_CLUSTER})")
    parser.add_argument("--devices", type=int, default=None, help="devices to use (default: all of the cluster)")
    parser.add_argument("--mode", choices=("mini-time", "mini-parallelism", "profiling"), default="mini-time",
                        help="TensorOpt §4.1: least time under the memory cap; fewest devices that fit; "
                             "or a table of device count -> least time")
    parser.add_argument("--memory-cap", default=None, metavar="SIZE",
                        help="per-device memory cap, e.g. 16GB, 14.5GiB, 2e10 (default: device memory / 1.1)")
    parser.add_argument("--algorithm", default="ft", help=ALGORITHM_HELP)
    parser.add_argument("--budget-s", type=float, default=None, help="time budget of a randomized search (mcmc)")
    parser.add_argument("--seed", type=int, default=None, help="seed of a randomized search")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="any option of the search, by its name in the search's options "
                             "(e.g. --algorithm mcmc --option max_proposals=500); an unknown one is refused")
    parser.add_argument("--batch-size", type=int, default=None, help="batch size (default: the zoo model's)")
    add_precision(parser)
    parser.add_argument("-o", "--output", default="plan.json", help="plan file to write (default: plan.json)")


def run(args: argparse.Namespace) -> int:
    out = Console()
    request = request_of(args)
    planning.check_algorithm(request.algorithm, request.options)
    cluster = planning.check_cluster(request.cluster, request.devices)
    memory_cap(cluster, cluster.device_count(request.devices), request.memory_cap_bytes)
    if args.cluster is None:
        out.print(f"cluster: {DEFAULT_CLUSTER} (the default: TensorOpt's 2 nodes x 8 V100; choose one with --cluster)")
    if args.precision is None and request.precision != "fp32":
        out.print(f"precision: {request.precision} (how {request.model} is trained; --precision fp32 to change)")
    with first_ctrl_c_stops(out.note):
        found = _planned(out, request)
        if found is None:
            out.print("no device count fits the memory cap: nothing written")
            return 1
        plan, fits = found
        cap = memory_cap(cluster, plan.num_devices, request.memory_cap_bytes)
        for line in plan_lines(plan, cap, fits):
            out.print(line)
        plan.save(args.output)
    out.print(f"written to {args.output}")
    return 0 if fits else 1


def _planned(out: Console, request: PlanRequest) -> tuple[Plan, bool] | None:
    """The plan and whether it fits (profiling: the fastest device count that fits, its table
    printed; None when none fits), the searches' phases shown as bars on a terminal."""
    with out.progress() as progress:
        with phase(progress, f"capturing {request.model}"):
            graph = planning.build_graph(request.model, request.batch_size)
        if request.mode != "profiling":
            with phase(progress, f"planning {request.model} ({request.algorithm}, {request.mode.replace('_', '-')})"):
                return planning.plan_model(graph, request, progress)
        table = planning.profile_devices(graph, request, progress)
    out.table(profile_table(table))
    plan = planning.fastest_fitting(table)
    if plan is not None:
        out.print(f"fastest that fits: {plan.num_devices} devices")
    return None if plan is None else (plan, True)


def request_of(args: argparse.Namespace) -> PlanRequest:
    options = dict(option_pairs(args.option))
    options.update((k, v) for k, v in (("budget_s", args.budget_s), ("seed", args.seed)) if v is not None)
    cap = None if args.memory_cap is None else size_bytes(args.memory_cap, "memory cap")
    return PlanRequest(args.model, args.cluster or DEFAULT_CLUSTER, args.devices, args.mode.replace("-", "_"),
                       cap, args.algorithm, options, args.batch_size, precision_of(args))


def add_precision(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--precision", choices=tuple(PRECISIONS), default=None,
                        help="training precision: fp32, or bf16-mixed (bfloat16 weights, activations and gradients; "
                             "float32 master weights and optimizer state). Default: how the zoo model's users train "
                             "it (bf16-mixed for the decoders of 1B parameters and more, else fp32)")


def precision_of(args: argparse.Namespace) -> str:
    return args.precision or planning.zoo_precision(args.model)


def option_pairs(texts: list[str]) -> list[tuple[str, str]]:
    """"name=value" pairs of --option, the value as text (search.registry converts it)."""
    pairs = []
    for text in texts:
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise ConfigError("--option is not NAME=VALUE", expected="e.g. max_proposals=500", got=repr(text))
        pairs.append((name.strip(), value.strip()))
    return pairs
