"""Bad values on the command line: each is refused with exit code 2 and one line
`stratagem <command>: error: ...` that says what was expected and what came, with no traceback and
nothing written; or it gets a result checked to be correct. Run in-process (stratagem.cli.main);
`run` and `validate` must refuse before anything is launched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import assert_says, cli, refused

ROOT = Path(__file__).resolve().parents[2]
PLAN = ("plan", "mlp-tiny", "--cluster", "cpu-1x2")
SIZE = "expected a size > 0, e.g. 16GB"


@pytest.mark.parametrize("args, fragments", [
    (["--memory-cap", "0"], ["memory cap is not valid", SIZE, "got '0'"]),
    (["--memory-cap=-1GB"], ["memory cap is not valid", SIZE, "got '-1GB'"]),
    (["--memory-cap", "nan"], ["memory cap is not valid", SIZE, "got 'nan'"]),
    (["--memory-cap", "inf"], ["memory cap is not valid", SIZE, "got 'inf'"]),
    (["--memory-cap", ""], ["memory cap is not valid", SIZE, "got ''"]),
    (["--memory-cap", "16XB"], ["memory cap is not valid", SIZE, "got '16XB'"]),
    (["--memory-cap", "1TB"], ["memory cap is above the devices' memory", "expected at most 23.00 GiB",
                               "got 931.32 GiB", "device.memory_bytes"]),
    (["--devices", "0"], ["device count on cluster 'cpu-1x2' is not valid", "expected an integer in 1..2",
                          "got 0"]),
    (["--devices", "-1"], ["expected an integer in 1..2", "got -1"]),
    (["--devices", "3"], ["expected an integer in 1..2", "got 3"]),
    (["--devices", "two"], ["argument --devices: invalid int value: 'two'"]),
    (["--batch-size", "0"], ["batch size is not valid", "expected an integer >= 1", "got 0"]),
    (["--batch-size", "-4"], ["batch size is not valid", "expected an integer >= 1", "got -4"]),
    (["--batch-size", "2.5"], ["argument --batch-size: invalid int value: '2.5'"]),
    (["--algorithm", "mcmc", "--budget-s", "0"], ["MCMC budget_s is not valid", "expected a finite number > 0",
                                                  "got 0.0"]),
    (["--algorithm", "mcmc", "--budget-s", "-1"], ["MCMC budget_s is not valid", "got -1.0"]),
    (["--algorithm", "mcmc", "--budget-s", "nan"], ["MCMC budget_s is not valid", "got nan"]),
    (["--algorithm", "mcmc", "--budget-s", "inf"], ["MCMC budget_s is not valid", "got inf"]),
    (["--algorithm", "mcmc", "--budget-s", "1", "--seed", "-1"], ["MCMC seed is not valid",
                                                                  "expected an integer >= 0", "got -1"]),
    (["--budget-s", "5"], ["search algorithm 'ft' takes no option 'budget_s'"]),
    (["--algorithm", "data-parallel", "--seed", "3"], ["search algorithm 'data-parallel' takes no option 'seed'",
                                                       "expected no options"]),
    (["--algorithm", "data-paralel"], ["unknown search algorithm 'data-paralel'", "Did you mean data-parallel"]),
    (["--algorithm", ""], ["unknown search algorithm ''", "expected one of data-parallel"]),
    (["--mode", "fast"], ["argument --mode: invalid choice: 'fast'"]),
    (["--option", "offload=true"], ["offload is a choice of the sharded weight states",
                                    "expected state_sharding=true with offload=true"]),
    (["--option", "state_sharding=true", "--option", "offload=true"],
     ["cluster 'cpu-1x2' has no host section", "nothing can be offloaded to host memory"]),
    (["--algorithm", "fsdp", "--option", "offload=true"], ["cluster 'cpu-1x2' has no host section"]),
    (["--algorithm", "fsdp", "--option", "offload=true", "--option", "reshard_after_forward=false"],
     ["offload frees each gathered weight after forward", "expected reshard_after_forward=true"]),
])
def test_plan_refuses_bad_planning_values(args, fragments, tmp_path):
    output = tmp_path / "never.json"
    assert_says(refused(*PLAN, *args, "-o", str(output)), *fragments)
    assert not output.exists()


@pytest.mark.parametrize("model, cluster, fragments", [
    ("mlp-tinyy", "cpu-1x2", ["no model 'mlp-tinyy' in the zoo", "mlp-tiny", "stratagem models"]),
    ("", "cpu-1x2", ["no model '' in the zoo"]),
    ("mlp-tiny", "cpu-1x2x", ["no cluster preset 'cpu-1x2x'", "Did you mean cpu-1x2"]),
    ("mlp-tiny", "v100-2x9", ["no cluster preset 'v100-2x9'", "Did you mean v100-2x8"]),
    ("mlp-tiny", "a100-0x8", ["preset 'a100-0x8'", "expected nodes >= 1", "got 0"]),
    ("mlp-tiny", "cpu-1x0", ["preset 'cpu-1x0'", "expected devices_per_node >= 1", "got 0"]),
    ("mlp-tiny", "absent.yaml", ["no such cluster file 'absent.yaml'"]),
])
def test_plan_refuses_unknown_models_and_clusters(model, cluster, fragments, tmp_path):
    output = tmp_path / "never.json"
    assert_says(refused("plan", model, "--cluster", cluster, "-o", str(output)), *fragments)
    assert not output.exists()


def test_plan_refuses_a_directory_as_cluster(tmp_path):
    assert_says(refused("plan", "mlp-tiny", "--cluster", str(tmp_path)), "is not a cluster file",
                "expected a name ending in .yaml, .yml, .json")


def test_a_memory_cap_within_device_memory_is_taken_as_given(tmp_path):
    found = cli(*PLAN, "--memory-cap", "16GB", "-o", str(tmp_path / "plan.json"))
    assert found.code == 0, found.err
    assert_says(found.out, "memory cap        14.90 GiB  fits")       # 16e9 bytes, not the 23 GiB / 1.1 default


def test_a_cap_nothing_fits_gets_the_leanest_plan_and_exit_code_1(tmp_path):
    found = cli(*PLAN, "--mode", "mini-parallelism", "--memory-cap", "1KB", "-o", str(tmp_path / "plan.json"))
    assert found.code == 1 and "Traceback" not in found.err
    assert_says(found.out, "memory cap           1000 B  DOES NOT FIT", "the plan that needs the least memory")


@pytest.mark.parametrize("args, fragments", [
    (["--devices", "0"], ["device count on cluster 'cpu-1x2' is not valid", "got 0"]),
    (["--devices", "-2"], ["device count on cluster 'cpu-1x2' is not valid", "got -2"]),
    (["--batch-size", "0"], ["batch size is not valid", "got 0"]),
    (["--baselines", "foo"], ["unknown baseline", "got foo"]),
])
def test_frontier_refuses_bad_values(args, fragments):
    assert_says(refused("frontier", "mlp-tiny", "--cluster", "cpu-1x2", *args), *fragments)


def test_simulate_refuses_a_cluster_smaller_than_the_plan(plan_path):
    assert_says(refused("simulate", str(plan_path), "--cluster", "cpu-1x1"),
                "device count on cluster 'cpu-1x1' is not valid", "expected an integer in 1..1", "got 2")


def test_simulate_names_the_closest_preset(plan_path):
    assert_says(refused("simulate", str(plan_path), "--cluster", "cpu-1x22x"), "no cluster preset 'cpu-1x22x'",
                "Did you mean")


@pytest.mark.parametrize("command", ["simulate", "explain"])
def test_plan_commands_refuse_a_missing_plan_file(command, tmp_path):
    assert_says(refused(command, str(tmp_path / "absent.json")), "no plan file", "stratagem plan MODEL -o")


def test_diff_refuses_a_negative_top(plan_path):
    assert_says(refused("diff", str(plan_path), str(plan_path), "--top", "-1"),
                "--top (changed ops to list) is not valid", "expected an integer >= 0", "got -1")


def test_diff_refuses_a_binary_plan_file(plan_path, tmp_path):
    binary = tmp_path / "binary.json"
    binary.write_bytes(bytes(range(256)))
    assert_says(refused("diff", str(plan_path), str(binary)), "is not a text file", "got byte 0x80 at offset 128")


@pytest.fixture
def no_launch(monkeypatch):
    """`run` and `validate` must refuse before launching anything: a launch fails the case."""
    def launch(*args, **kwargs):
        raise AssertionError("a run was launched with a bad value")
    monkeypatch.setattr("stratagem.runtime.session.launch", launch)


@pytest.mark.parametrize("args, fragments", [
    (["--steps", "0"], ["steps is not valid", "expected an integer >= 1", "got 0"]),
    (["--steps", "-1"], ["steps is not valid", "got -1"]),
    (["--steps", "x"], ["argument --steps: invalid int value: 'x'"]),
    (["--nproc", "0"], ["nproc is not valid", "expected an integer >= 1", "got 0"]),
    (["--nproc", "-1"], ["nproc is not valid", "got -1"]),
    (["--nproc", "3"], ["--nproc does not match the plan", "expected 2 processes", "got 3"]),
    (["--steps", "5", "--warmup", "5"], ["warmup (of 5 steps) is not valid", "expected an integer in 0..4",
                                         "got 5"]),
    (["--warmup", "9"], ["warmup (of 5 steps) is not valid", "got 9"]),
    (["--warmup", "-1"], ["warmup (of 5 steps) is not valid", "got -1"]),
    (["--lr", "-1"], ["learning rate is not valid", "expected a finite number >= 0", "got -1.0"]),
    (["--lr", "nan"], ["learning rate is not valid", "got nan"]),
    (["--lr", "inf"], ["learning rate is not valid", "got inf"]),
    (["--timeout", "0"], ["timeout (seconds) is not valid", "expected a finite number > 0", "got 0.0"]),
    (["--timeout", "-5"], ["timeout (seconds) is not valid", "got -5.0"]),
    (["--timeout", "nan"], ["timeout (seconds) is not valid", "got nan"]),
    (["--relaunch", "-1"], ["relaunches is not valid", "expected an integer >= 0", "got -1"]),
    (["--seed", "-1"], ["seed is not valid", "expected an integer >= 0", "got -1"]),
])
def test_run_refuses_bad_run_values_before_launching(args, fragments, plan_path, no_launch, tmp_path):
    report = tmp_path / "never.json"
    assert_says(refused("run", str(plan_path), *args, "-o", str(report)), *fragments)
    assert not report.exists()


def test_validate_refuses_zero_steps(plan_path, no_launch):
    assert_says(refused("validate", str(plan_path), "--steps", "0"), "steps is not valid", "got 0")


def test_run_refuses_a_plan_whose_strategy_misses_ops(plan_record, no_launch, tmp_path):
    del plan_record["strategy"]["ops"]["relu"]
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(plan_record))
    assert_says(refused("run", str(path)), "field 'strategy.ops'", "strategy lacks ops", "none for ['relu']")



@pytest.mark.parametrize("args, fragments", [
    (["comm", "--repeats", "0"], ["repeats is not valid", "expected an integer >= 1", "got 0"]),
    (["comm", "--warmup", "-1"], ["warmup is not valid", "expected an integer >= 0", "got -1"]),
    (["comm", "--min-exp", "10", "--max-exp", "5"], ["largest size exponent (max_exp) is not valid",
                                                     "expected an integer >= 10", "got 5"]),
    (["comm", "--kinds", "all_reduc"], ["unknown collective 'all_reduc'", "Did you mean all_reduce"]),
    (["comm", "--nproc", "1"], ["--nproc", "expected at least 2 processes", "got 1"]),
    (["ops", "mlp-tiny", "--devices", "0"], ["devices is not valid", "expected an integer >= 1", "got 0"]),
    (["ops", "mlp-tiny", "--max-axes", "0"], ["max_axes is not valid", "got 0"]),
    (["ops", "mlp-tiny", "--repeats", "0"], ["repeats (for a stable mean) is not valid", "got 0"]),
    (["ops", "mlp-tiny", "--warmup", "-1"], ["warmup is not valid", "got -1"]),
])
def test_profile_refuses_bad_values_before_measuring(args, fragments, monkeypatch, tmp_path):
    def launch(*args, **kwargs):
        raise AssertionError("profile launched processes with a bad value")
    monkeypatch.setattr("stratagem.cli.profile.subprocess.run", launch)
    output = tmp_path / "never.json"
    assert_says(refused("profile", *args, "-o", str(output)), *fragments)
    assert not output.exists()

@pytest.mark.parametrize("argv, fragment", [
    (["plan", "mlp-tiny", "--cluster", "cpu-1x2", "--devices", "0"], "device count on cluster 'cpu-1x2'"),
    (["run", "PLAN", "--steps", "0"], "steps is not valid"),
])
def test_the_installed_entry_point_refuses_without_a_traceback(argv, fragment, plan_path, tmp_path):
    """As a user runs it (`python -m stratagem`), in a process of its own, under a timeout."""
    argv = [str(plan_path) if a == "PLAN" else a for a in argv]
    done = subprocess.run([sys.executable, "-m", "stratagem", *argv], capture_output=True, text=True, timeout=50,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert_says(done.stderr, f"stratagem {argv[0]}: error: ", fragment)
    assert not list(tmp_path.iterdir())                     # nothing written
