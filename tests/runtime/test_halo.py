"""Spatial splits with halos (space.halo, runtime.halo, the localops `window` adapter) train as one
process does: U-Net's convolutions and pools split along rows (2 ranks), rows and columns (4 ranks:
two exchanges, corners arriving with the second) and samples and rows (4 ranks), the elementwise
ops between them split along the same image dims; and FT's own frontier points on U-Net with one
image per batch (where splitting rows pays), three of those that split rows or columns, on 2 ranks.
Each gives the losses, first-step gradients and parameters after 3 Adam steps of a single-process
run in float64 (runtime.compare's bounds)."""

from __future__ import annotations

import pytest

from stratagem.frontend import zoo
from stratagem.runtime.schedule import build_schedule
from stratagem.runtime.session import RunOptions, run_plans
from stratagem.search.context import context, make_plan
from stratagem.search.planner import frontier
from stratagem.space import Configuration, Level
from stratagem.space.runnable import refusal
from stratagem.tdl.graphops import AnalysisCache

pytestmark = pytest.mark.numerics

STEPS = 3
# per plan: the levels each op tries in turn (window ops name rows h and columns w; elementwise ops
# and the loss name a 4-D activation's dims d0..d3, the loss's positions n, d2, d3)
CASES = {
    2: {"rows": ((("h", 2),), (("d2", 2),))},
    4: {"rows-columns": ((("h", 2), ("w", 2)), (("d2", 2), ("d3", 2))),
        "samples-rows": ((("b", 2), ("h", 2)), (("d0", 2), ("d2", 2)), (("n", 2), ("d2", 2)))},
}


def spatial_plan(devices: int, tries):
    """Each op of U-Net (tiny) under the first of `tries` the runtime runs, else replicated."""
    ctx = context(zoo.build("unet-tiny"), f"cpu-1x{devices}", devices)
    analyses = AnalysisCache(ctx.graph)
    strategy = {}
    for op in ctx.graph.ops:
        strategy[op.name] = Configuration((Level(None, devices),))
        for levels in tries:
            config = Configuration(tuple(Level(d, k) for d, k in levels))
            if {d for d, _ in levels} <= _dims(analyses[op.name]) and _runs(analyses[op.name], config, devices):
                strategy[op.name] = config
                break
    return make_plan(ctx, strategy, "spatial")


def _dims(analysis) -> set[str]:
    return {d.name for d in analysis.dims}


def _runs(analysis, config, devices) -> bool:
    try:
        return refusal(analysis, config, devices) is None
    except Exception:       # a split the analysis rejects (an uneven or unread chunk)
        return False


def frontier_plans_with_halos(devices: int, count: int = 3) -> dict:
    """Of FT's frontier on U-Net (tiny) with one image, `count` points spread along it among those
    whose plans split rows or columns of some window op."""
    front = list(frontier(zoo.build("unet-tiny", batch_size=1), f"cpu-1x{devices}", devices, pipeline="no"))
    spatial = [p for p in front if halo_count(p)]
    picked = [spatial[round(i * (len(spatial) - 1) / max(1, count - 1))] for i in range(min(count, len(spatial)))]
    return {f"ft-{i}": p for i, p in enumerate(picked)}


def halo_count(plan) -> int:
    schedule = build_schedule(plan.graph, plan.strategy, plan.num_devices, 0)
    return sum(len(halo.axes) for step in schedule.steps for halo in step.halos.values())


@pytest.fixture(scope="module", params=sorted(CASES), ids=lambda n: f"{n}ranks")
def runs(request, tmp_path_factory):
    devices = request.param
    directory = tmp_path_factory.mktemp(f"halo{devices}")
    plans, paths = {}, []
    for name, tries in CASES[devices].items():
        plans[name] = spatial_plan(devices, tries)
    if devices == 2:
        plans.update(frontier_plans_with_halos(devices))
    for name, plan in plans.items():
        paths.append(directory / f"{name}.json")
        plan.save(paths[-1])
    found = run_plans(paths, RunOptions(steps=STEPS, check=True, timeout_s=180, out_dir=str(directory / "run")))
    return devices, plans, dict(zip(plans, found))


def test_spatial_plans_exchange_halos(runs):
    """Every convolution and pool of U-Net is split along rows, and every 3x3 convolution reads
    its input through a halo exchange (2x2 pools and the 1x1 head read their own rows alone): the
    plans are what they claim to be."""
    devices, plans, _ = runs
    assert devices == 4 or sum(name.startswith("ft-") for name in plans) == 3
    for name, plan in plans.items():
        if name.startswith("ft-"):
            assert halo_count(plan) > 0, name
            continue
        windows = [op for op in plan.graph.ops if op.kind in ("conv2d", "max_pool2d")]
        three = [op for op in windows if op.kind == "conv2d" and plan.graph.tensors[op.inputs[1]].shape[-1] == 3]
        assert all("h" in plan.strategy[op.name].degrees for op in windows), name
        assert halo_count(plan) == len(three) * (2 if name == "rows-columns" else 1), name


def test_spatial_plans_train_as_one_process_does(runs):
    devices, plans, found = runs
    failed = {name: r["check"] for name, r in found.items() if not r["check"]["same_training"]}
    assert not failed, failed
    for report in found.values():
        assert report["world_size"] == devices and len(report["losses"]) == STEPS
