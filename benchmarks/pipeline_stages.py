"""When pipeline stages pay: the fastest plan with stages (search.pipeline) against the fastest
without, simulated, on fast and on slowed links between nodes (issue 21's yardstick).

For each model (the zoo's default precision: bf16-mixed for these) and cluster (`a100-Nx8`,
`h100-Nx8`, 2 and 4 nodes), twice: as the preset has it (one 200 / 400 Gb/s NIC per GPU), and with
the links between nodes slowed to 25 Gb/s per node (each of the 8 NICs at 1/8 of that). Prints the
fastest plan under the device memory (the planner's cap, memory / 1.1) of:
    without stages   the practitioners' plans: data parallel, fsdp, fsdp with every block
                     recomputed, fsdp-tp (tensor parallel in a node, FSDP across; with and without
                     recomputation). FT's own frontier is not searched here (at these sizes it
                     takes 10-30 minutes a case on 2 cores); `--ft` adds it.
    with stages      the pipeline search's plans (stages x micro-batches, 1F1B, a practitioners'
                     plan in each stage; `--stage-ft` adds those whose stages each take their own
                     point of FT's frontier on a stage's devices, chosen with the cuts: slow too)
and the pipeline search's wall time (captures at the micro-batch sizes included).

Run: PYTHONPATH=. python benchmarks/pipeline_stages.py [model ...] [--nodes 2 4] [--kinds a100 h100]
     [--ft] [--stage-ft]. Wall times need an idle machine.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import yaml

import stratagem as sg
from stratagem.cluster.loader import preset_files
from stratagem.search import registry
from stratagem.search.context import NothingFits, context, least_time
from stratagem.search.pipeline import PipelineOptions, pipeline_plans

SLOW_BITS_PER_S = 25e9          # per node
WITHOUT = (("data-parallel", {}), ("fsdp", {}), ("fsdp", {"recompute": True}), ("fsdp-tp", {}),
           ("fsdp-tp", {"recompute": False}))


def cluster_file(kind: str, nodes: int, slow: bool, directory: Path) -> str:
    """A preset family's cluster at `nodes` nodes, its links between nodes slowed when `slow`."""
    name = f"{kind}-{nodes}x8"
    if not slow:
        return name
    family = next(p for p in preset_files() if p.stem == f"{kind}-Nx8")
    spec = yaml.safe_load(family.read_text())
    spec["name"], spec["nodes"] = f"{name}-25g", nodes
    nics = spec["network"]["nics_per_node"]
    spec["network"]["link"]["bandwidth_bytes_per_s"] = SLOW_BITS_PER_S / 8 / nics
    path = directory / f"{name}-25g.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def best(plans, cap):
    try:
        return least_time(plans, cap)
    except NothingFits:
        return None


def describe(plan) -> str:
    if plan is None:
        return "nothing fits"
    label = plan.details.get("label") or (plan.algorithm + (" + recompute" if plan.recompute else ""))
    return f"{label}: {plan.iteration_time_s * 1e3:,.0f} ms, {plan.peak_memory_bytes / 2**30:.1f} GiB"


def run_case(model: str, kind: str, nodes: int, slow: bool, directory: Path, with_ft: bool, stage_ft: bool) -> None:
    cluster = cluster_file(kind, nodes, slow, directory)
    precision = sg.zoo.info(model).precision
    ctx = context(sg.zoo.build(model), cluster, nodes * 8, precision=precision)
    without = [registry.run(ctx, name, options) for name, options in WITHOUT]
    if with_ft:
        without.append(registry.run(ctx, "ft", {}))
    start = time.perf_counter()
    staged = pipeline_plans(ctx, PipelineOptions())
    if stage_ft:
        staged += pipeline_plans(ctx, PipelineOptions(inner="ft"))
    wall_s = time.perf_counter() - start
    a, b = best(without, ctx.memory_cap_bytes), best(staged, ctx.memory_cap_bytes)
    gain = f"{a.iteration_time_s / b.iteration_time_s:.2f}x" if a and b else "-"
    links = "25 Gb/s/node" if slow else "preset"
    print(f"| {model} | {kind}-{nodes}x8 | {links} | {describe(a)} | {describe(b)} | {gain} | {wall_s:.0f} s |",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*", default=["gpt-7b", "gpt-70b"])
    parser.add_argument("--nodes", nargs="*", type=int, default=[2, 4])
    parser.add_argument("--kinds", nargs="*", default=["a100", "h100"])
    parser.add_argument("--ft", action="store_true", help="also FT's frontier without stages (slow)")
    parser.add_argument("--stage-ft", action="store_true", help="also stages each on its own FT point (slow)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print("| model | cluster | links | fastest without stages | fastest with stages | speed-up | search wall |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as directory:
        for model in args.models:
            for kind in args.kinds:
                for nodes in args.nodes:
                    for slow in (False, True):
                        run_case(model, kind, nodes, slow, Path(directory), args.ft, args.stage_ft)


if __name__ == "__main__":
    main()
