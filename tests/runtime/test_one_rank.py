"""A plan for one device runs on one rank (the mesh (1,), everything replicated) and trains as the
module does in a single process; its ops' layouts have no mesh axes, so every gradient placement
the runtime gives DTensor must still name the one axis the rank's mesh has."""

from __future__ import annotations

import pytest

from stratagem.runtime.session import RunOptions, run_plans

from .plans import saved

pytestmark = pytest.mark.numerics     # run under every kernel path by scripts/numerics_variants.sh

MODELS = ("mlp-tiny", "lenet-tiny", "transformer-tiny")


def test_one_device_plans_train_as_one_process_does(tmp_path):
    paths = [saved(tmp_path, model, "data-parallel", 1) for model in MODELS]
    reports = run_plans(paths, RunOptions(steps=2, check=True, timeout_s=120, out_dir=str(tmp_path / "run")))
    for model, report in zip(MODELS, reports):
        assert report["world_size"] == 1 and len(report["losses"]) == 2, model
        assert report["check"]["same_training"], (model, report["check"])
