"""examples/ run as their docstrings say: your own training loop around a plan (parallelize, your
optimizer, clipping across shards, each rank's shard of the batch, torch.compile with aot_eager)
trains on 2 gloo ranks, compiled as eagerly: the first step's loss (same weights, same batch) within
one forward's rounding bound (tdl.rounding), every step finite."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from stratagem.frontend import zoo
from stratagem.runtime.processes import MARKER_ENV, new_marker, run_tree
from stratagem.search import registry
from stratagem.search.context import context
from stratagem.tdl.rounding import same_math_rtol

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_own_loop.py"
STEPS = 3


def losses(plan_path: Path, *extra: str) -> list[float]:
    env = {**os.environ, MARKER_ENV: new_marker(), "PYTHONPATH": str(EXAMPLE.parents[1])}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
               str(EXAMPLE), str(plan_path), "--steps", str(STEPS), *extra]
    done = run_tree(command, env, timeout_s=240)
    assert done.code == 0, done.output[-3000:]
    return [float(x) for x in re.findall(r"^step \d+ loss (\S+)$", done.output, re.M)]


@pytest.fixture(scope="module")
def plan_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("example") / "plan.json"
    ctx = context(zoo.build("mlp-tiny", batch_size=8), "cpu-1x2", 2)
    registry.run(ctx, "fsdp", {}).save(path)
    return path


def test_your_own_loop_trains_compiled_as_eagerly(plan_path):
    from stratagem.plan import Plan
    eager = losses(plan_path)
    compiled = losses(plan_path, "--compile", "aot_eager")
    assert len(eager) == len(compiled) == STEPS
    bound = same_math_rtol(Plan.load(plan_path).graph)
    assert abs(eager[0] - compiled[0]) <= bound * abs(eager[0]), (eager, compiled)
    assert all(x == x and abs(x) != float("inf") for x in eager + compiled)
