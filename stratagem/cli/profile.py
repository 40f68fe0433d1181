"""`stratagem profile ops|comm`: measure op times or collective times on this machine.

    stratagem profile comm --nproc 4 -o comm.json --cluster-out mine.yaml   # launches torchrun itself
    stratagem profile ops MODEL --devices 4 --nproc 4 -o ops.json --cluster-out mine.yaml
    stratagem plan MODEL --cluster mine.yaml                                # priced with both tables

`profile ops --nproc N` measures with N processes side by side, as N ranks on one machine share its
cores and memory bandwidth (each entry: the slowest process's time). `--cluster-out FILE` writes (or
updates) a cluster file that names the table: `--cluster`'s content (default cpu-1xN for the N
ranks or devices measured) with `tables: {ops, comm}`. Every command that
takes a cluster then prices with the tables where they have an entry (cluster.loader, the cost
model); from Python, CostModel(compute_table=..., comm_table=...) also takes them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys

from stratagem import values
from stratagem.cluster import load_spec, with_tables
from stratagem.cost import ComputeTable
from stratagem.errors import ConfigError
from stratagem.space import SpaceOptions

COMM_DEFAULTS = {"min_exp": 10, "max_exp": 24, "repeats": 10, "warmup": 2, "after_compute_ms": 2.0}


# (argument, what it is, suffixes its writer can produce): checked before any work (cli.main)
OUTPUTS = (("output", "profile table", ()), ("cluster_out", "cluster file", (".yaml", ".yml")))

def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="what", metavar="ops|comm", required=True)
    comm = sub.add_parser("comm", help="collective times per device partitioning and message size")
    comm.add_argument("-o", "--output", default="comm-table.json")
    comm.add_argument("--nproc", type=int, default=2, help="processes to launch (without torchrun)")
    comm.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    comm.add_argument("--min-exp", type=int, default=COMM_DEFAULTS["min_exp"], help="smallest size 2^i bytes")
    comm.add_argument("--max-exp", type=int, default=COMM_DEFAULTS["max_exp"], help="largest size 2^i bytes")
    comm.add_argument("--repeats", type=int, default=COMM_DEFAULTS["repeats"])
    comm.add_argument("--warmup", type=int, default=COMM_DEFAULTS["warmup"])
    comm.add_argument("--kinds", nargs="+", default=None, help="collectives (default: all)")
    comm.add_argument("--after-compute-ms", type=float, default=COMM_DEFAULTS["after_compute_ms"],
                      help="also time each collective after this much compute on every rank, as a step "
                           "reaches it, and keep the larger time (0: after a barrier only)")
    _cluster_options(comm, "ranks")
    ops = sub.add_parser("ops", help="forward and backward time of every distinct local op of a model")
    ops.add_argument("model", help="a model zoo name")
    ops.add_argument("-o", "--output", default="ops-table.json")
    ops.add_argument("--devices", type=int, default=8, help="devices the search would use")
    ops.add_argument("--max-axes", type=int, default=3)
    ops.add_argument("--repeats", type=int, default=10)
    ops.add_argument("--warmup", type=int, default=2)
    ops.add_argument("--device", default="cpu", help="torch device to measure on")
    ops.add_argument("--device-kind", default=None, help="label matching the cluster's device kind")
    ops.add_argument("--nproc", type=int, default=1,
                     help="processes measuring side by side, as that many ranks run (each entry: the slowest)")
    _cluster_options(ops, "devices")


def _cluster_options(parser: argparse.ArgumentParser, counted: str) -> None:
    parser.add_argument("--cluster-out", default=None, metavar="FILE.yaml",
                        help="write (or update) a cluster file naming the table, to plan with")
    parser.add_argument("--cluster", default=None,
                        help=f"the cluster the file describes (default: cpu-1xN, N the {counted} measured)")


def write_cluster_file(args: argparse.Namespace, count: int, **tables: str) -> None:
    if args.cluster_out is None:
        return
    with_tables(args.cluster or f"cpu-1x{count}", args.cluster_out, **tables)
    print(f"wrote {args.cluster_out}, naming {' and '.join(tables.values())}: plan with --cluster {args.cluster_out}")


def run(args: argparse.Namespace) -> int:
    base_device_kind(args)                      # a cluster that cannot be loaded fails before the work
    return run_comm(args) if args.what == "comm" else run_ops(args)


def base_device_kind(args: argparse.Namespace) -> str | None:
    """The device kind of the cluster `--cluster-out` describes (None without --cluster-out)."""
    if getattr(args, "cluster_out", None) is None:
        return None
    count = args.nproc if args.what == "comm" else args.devices
    return load_spec(args.cluster or f"cpu-1x{count}").device.kind


# ---- comm ----------------------------------------------------------------------------------------

def _torchrun(nproc: int, argv: list[str]) -> int:
    """`stratagem ARGV` in `nproc` processes under torchrun (each sees itself under torchrun)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               "-m", "stratagem", *argv]
    return subprocess.run(command, check=False).returncode


def _under_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ or ("RANK" in os.environ and "WORLD_SIZE" in os.environ)


def _comm_argv(args: argparse.Namespace) -> list[str]:
    argv = ["profile", "comm", "-o", args.output, "--backend", args.backend, "--min-exp", str(args.min_exp),
            "--max-exp", str(args.max_exp), "--repeats", str(args.repeats), "--warmup", str(args.warmup),
            "--after-compute-ms", str(args.after_compute_ms)]
    return argv + (["--kinds", *args.kinds] if args.kinds else [])


def comm_options(args: argparse.Namespace):
    from stratagem.runtime.profile_comm import KINDS, CommProfileOptions
    return CommProfileOptions(args.min_exp, args.max_exp, args.repeats, args.warmup, tuple(args.kinds or KINDS),
                              args.after_compute_ms / 1e3)


def run_comm(args: argparse.Namespace) -> int:
    options = comm_options(args)            # checked before any process starts
    if not _under_torchrun():
        if args.nproc < 2:
            raise ConfigError("--nproc", expected="at least 2 processes", got=str(args.nproc))
        code = _torchrun(args.nproc, _comm_argv(args))
        if code == 0:
            write_cluster_file(args, args.nproc, comm=args.output)
        return code
    import torch
    import torch.distributed as dist

    from stratagem.runtime.profile_comm import profile_world

    backend = args.backend if args.backend != "auto" else ("nccl" if torch.cuda.is_available() else "gloo")
    local = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device(f"cuda:{local}") if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend)
    try:
        table = profile_world(options, device)
        if table is not None:
            table.save(args.output)
            print(f"wrote {len(table.series)} series ({table.backend}, {table.world_size} ranks) to {args.output}")
    finally:
        dist.destroy_process_group()
    from stratagem.runtime.worker import exit_now
    exit_now(0)      # past torch's C++ teardown, which can abort a gloo rank at exit (runtime.worker)
    return 0


# ---- ops -----------------------------------------------------------------------------------------

def resolve_model(name: str):
    try:
        zoo = importlib.import_module("stratagem.frontend.zoo")
    except ModuleNotFoundError as error:
        if error.name not in ("stratagem.frontend.zoo",):
            raise
        raise ConfigError(f"cannot build model {name!r}: the model zoo (stratagem.frontend.zoo) is not "
                          "in this checkout", hint="From Python, call stratagem.runtime.profile_ops."
                          "profile_graph(graph, num_devices) on a Graph") from None
    return zoo.build(name)


def run_ops(args: argparse.Namespace) -> int:
    values.integer(args.nproc, "--nproc", minimum=1)
    if args.nproc > 1 and not _under_torchrun():
        return _ops_side_by_side(args)
    from stratagem.runtime.profile_ops import profile_graph, slowest_rank

    graph = resolve_model(args.model)
    options = SpaceOptions(max_axes=args.max_axes, runnable=True)
    if _under_torchrun():
        import torch.distributed as dist
        dist.init_process_group("gloo")
        try:
            table = slowest_rank(profile_graph(graph, args.devices, options, repeats=args.repeats,
                                               warmup=args.warmup, device=args.device, label=args.device_kind,
                                               before_each=dist.barrier))
            if table is not None:
                table.save(args.output)
        finally:
            dist.destroy_process_group()
        from stratagem.runtime.worker import exit_now
        exit_now(0)      # past torch's C++ teardown, which can abort a gloo rank at exit (runtime.worker)
    table = profile_graph(graph, args.devices, options, repeats=args.repeats, warmup=args.warmup,
                          device=args.device, label=args.device_kind)
    return _finish_ops(args, table)


def _ops_side_by_side(args: argparse.Namespace) -> int:
    """`--nproc N`: N ranks measure every op and the runtime's own time per op side by side (rank 0
    writes the slowest rank's times); this process finishes the table."""
    argv = ["profile", "ops", args.model, "-o", args.output, "--devices", str(args.devices), "--max-axes",
            str(args.max_axes), "--repeats", str(args.repeats), "--warmup", str(args.warmup), "--device",
            args.device, *(["--device-kind", args.device_kind] if args.device_kind else [])]
    code = _torchrun(args.nproc, argv)
    if code != 0:
        return code
    return _finish_ops(args, ComputeTable.load(args.output))


def _finish_ops(args: argparse.Namespace, table) -> int:
    table.save(args.output)
    where = f" by {args.nproc} processes side by side" if args.nproc > 1 else ""
    print(f"wrote {len(table)} op timings ({table.device_kind}){where} to {args.output}")
    kind = base_device_kind(args)
    if kind is not None and kind != table.device_kind:
        raise ConfigError("the cluster file would name op times measured on another kind of device",
                          expected=f"a table for {kind!r} (the cluster's device)", got=repr(table.device_kind),
                          hint=f"The table is saved in {args.output}; label it with --device-kind {kind!r} "
                               "if this machine is that device, or pick the cluster with --cluster")
    write_cluster_file(args, args.devices, ops=args.output)
    return 0
