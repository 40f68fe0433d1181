"""`stratagem frontier MODEL`: the time / peak-memory frontier (TensorOpt §3) as a table, a JSON
file and a plot with the baselines (TensorOpt Fig. 6).

    stratagem frontier transformer --cluster v100-2x8 -o frontier.json --plot frontier.png

Ctrl-C stops the search: the frontier of the points simulated so far is shown and written, and
says so; Ctrl-C again aborts at once (exit code 130).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from stratagem.cli.stopping import first_ctrl_c_stops
from stratagem.errors import ConfigError
from stratagem.report import frontier_plot, planning
from stratagem.report.console import Console
from stratagem.report.planning import DEFAULT_CLUSTER
from stratagem.cli.plan import add_precision, precision_of
from stratagem.report.units import format_bytes, format_seconds
from stratagem.search.context import fits_host
from stratagem.search.progress import SILENT, phase
from stratagem.search.stopping import interruption

BASELINES = ("data-parallel", "optcnn", "tofu-like", "mesh-tf")


# (argument, what it is, suffixes its writer can produce): checked before any work (cli.main)
OUTPUTS = (("output", "frontier file", ()), ("plot", "plot", (".png", ".pdf", ".svg")))


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="a model zoo name (`stratagem models` lists them)")
    parser.add_argument("--cluster", default=None,
                        help=f"a preset name or a cluster YAML/JSON file (default: {DEFAULT_CLUSTER})")
    parser.add_argument("--devices", type=int, default=None, help="devices to use (default: all of the cluster)")
    parser.add_argument("--batch-size", type=int, default=None, help="batch size (default: the zoo model's)")
    add_precision(parser)
    parser.add_argument("-o", "--output", default=None, help="write the frontier as JSON (every plan in it)")
    parser.add_argument("--plot", default=None, metavar="PNG",
                        help="draw memory against time with compute and network time and the baselines")
    parser.add_argument("--bound", action="store_true",
                        help="also find a certified lower bound on the frontier (FT's heuristics relaxed) and "
                             "print FT's largest time gap to it")
    parser.add_argument("--baselines", default=",".join(BASELINES),
                        help=f"baselines to draw with --plot, comma-separated, or none (default: {','.join(BASELINES)})")


def run(args: argparse.Namespace) -> int:
    out = Console()
    cluster_name = args.cluster or DEFAULT_CLUSTER
    planning.check_cluster(cluster_name, args.devices)
    names = baseline_names(args.baselines)
    if args.cluster is None:
        out.print(f"cluster: {DEFAULT_CLUSTER} (the default; choose one with --cluster)")
    with first_ctrl_c_stops(out.note):
        front, ctx = _tracked(out, args, cluster_name)
        points = frontier_plot.frontier_points(front, ctx.model)
        devices = ctx.num_devices
        out.table(frontier_plot.frontier_table(points, f"{args.model} on {cluster_name}, {devices} devices: "
                                                       f"{len(front)} plans on the frontier"))
        stop = interruption(front.details)
        if stop is not None:
            out.print(f"search {stop.text}")
        if args.bound:
            out.print(bound_line(front.details.get("lower_bound", {})))
        cap = ctx.memory_cap_bytes
        out.print(f"memory cap {format_bytes(cap)} (device memory / 1.1); the fastest plan that fits: "
                  f"{fastest_under(front, cap)}")
        if args.output:
            front.save(args.output)
            out.print(f"frontier written to {args.output}")
        if args.plot:
            if stop is not None and names:
                out.print("baselines left out of the plot: the search was stopped")
            _plot(out, args, ctx, front, points, [] if stop is not None else names, cluster_name)
    return 0


def _tracked(out: Console, args: argparse.Namespace, cluster_name: str):
    """(the frontier, its planning context), the phases shown as bars on a terminal."""
    with out.progress() as progress:
        with phase(progress, f"capturing {args.model}"):
            graph = planning.build_graph(args.model, args.batch_size)
        with phase(progress, f"tracking the frontier of {args.model}"):
            front, ctx = planning.frontier_with_context(graph, cluster_name, args.devices,
                                                        precision=precision_of(args), progress=progress,
                                                        bound=args.bound)
    return front, replace(ctx, progress=SILENT)


def _plot(out: Console, args: argparse.Namespace, ctx, front, points, names: list[str], cluster_name: str) -> None:
    baselines = {}
    for name in out.track(names, "baselines"):
        made, failed = frontier_plot.baseline_points(ctx, front, [name])
        baselines.update(made)
        for key, why in failed.items():
            out.print(f"baseline {key} left out: {why}")
    frontier_plot.write_frontier_png(points, baselines, args.plot,
                                     f"{args.model} on {cluster_name} ({ctx.num_devices} devices)",
                                     ctx.memory_cap_bytes)
    out.print(f"plot written to {args.plot}")


def baseline_names(text: str) -> list[str]:
    if text.strip().lower() in ("", "none"):
        return []
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = (*BASELINES, "owt", "model-parallel")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError("unknown baseline", expected=f"some of {', '.join(known)}, or none", got=", ".join(unknown))
    return names


def bound_line(found: dict) -> str:
    """FT's gap to the certified lower bound (search.ft_bound), in FT's own cost terms."""
    if "largest_time_gap" not in found:
        return f"lower bound: {found.get('stopped', 'not found')}"
    line = (f"FT's frontier is within {found['largest_time_gap']:.1%} of a certified lower bound on time at every "
            f"memory from its leanest point (largest at {format_bytes(found['at_memory_bytes'])}; FT's own cost "
            f"terms; {found['seconds']:.1f} s to find)")
    if "bound_leaner_from_bytes" in found:
        line += (f"; no strategy is leaner than {format_bytes(found['bound_leaner_from_bytes'])}, FT's leanest "
                 f"point is at {format_bytes(found['frontier_leanest_bytes'])}")
    return line


def fastest_under(front, cap: float) -> str:
    """The fastest point under the cap whose offloaded state fits its hosts too."""
    fitting = [p for p in front if p.peak_memory_bytes <= cap and fits_host(p)]
    if not fitting:
        return "none"
    best = min(fitting, key=lambda p: p.iteration_time_s)
    return f"{format_seconds(best.iteration_time_s)} at {format_bytes(best.peak_memory_bytes)} (simulated)"
