"""`stratagem plan`: a default cluster, the modes, any algorithm, and errors a newcomer can act on."""

from __future__ import annotations

import pytest

from stratagem.cli import main
from stratagem.plan import Plan
from stratagem.report.planning import DEFAULT_CLUSTER


def test_a_model_name_alone_plans_on_the_default_cluster(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "rnn-tiny"]) == 0
    out = capsys.readouterr().out
    plan = Plan.load(tmp_path / "plan.json")
    assert plan.cluster == DEFAULT_CLUSTER == "v100-2x8" and plan.num_devices == 16
    assert f"cluster: {DEFAULT_CLUSTER} (the default" in out and "fits" in out
    assert plan.iteration_time_s > 0 and plan.peak_memory_bytes > 0


def test_a_baseline_by_name_is_that_baseline(plan_files):
    from stratagem.search.strategies import data_parallel_strategy
    from stratagem.search.context import context
    plan = Plan.load(plan_files["dp"])
    assert plan.algorithm == "data-parallel" and plan.num_devices == 2
    expected = data_parallel_strategy(context(plan.graph, plan.cluster, 2))
    assert {op: str(c) for op, c in plan.strategy.items()} == {op: str(c) for op, c in expected.items()}


def test_profiling_lists_every_device_count(tmp_path, capsys):
    out_file = tmp_path / "p.json"
    assert main(["plan", "rnn-tiny", "--devices", "4", "--mode", "profiling", "-o", str(out_file)]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("profiling")))
    assert [line.split()[0] for line in lines[start + 2:start + 6]] == ["1", "2", "3", "4"]
    assert Plan.load(out_file).num_devices in (1, 2, 3, 4)


def test_mini_parallelism_takes_more_devices_when_one_does_not_fit(tmp_path, capsys):
    one = tmp_path / "one.json"
    assert main(["plan", "rnn-tiny", "--devices", "1", "-o", str(one)]) == 0
    cap_bytes = 0.8 * Plan.load(one).peak_memory_bytes
    least = tmp_path / "least.json"
    rc = main(["plan", "rnn-tiny", "--devices", "4", "--mode", "mini-parallelism", "--memory-cap", f"{cap_bytes:.0f}",
               "-o", str(least)])
    plan = Plan.load(least)
    assert plan.num_devices > 1
    assert (rc == 0) == (plan.peak_memory_bytes <= cap_bytes)


def test_a_cap_nothing_fits_writes_the_leanest_plan_and_says_what_to_do(tmp_path, capsys):
    assert main(["plan", "rnn-tiny", "--devices", "2", "--memory-cap", "1kB", "-o", str(tmp_path / "x.json")]) == 1
    out = capsys.readouterr().out
    assert "DOES NOT FIT" in out and "Raise --memory-cap" in out


@pytest.mark.parametrize("args, message", [
    (["rnn-tnyy"], "no model 'rnn-tnyy' in the zoo"),
    (["rnn-tiny", "--cluster", "v100-9x9"], "no cluster preset 'v100-9x9'"),
    (["rnn-tiny", "--memory-cap", "16QB"], "e.g. 16GB, 14.5GiB"),
    (["rnn-tiny", "--algorithm", "data-paralel"], "Did you mean data-parallel"),
    (["rnn-tiny", "--devices", "99"], "expected an integer in 1..16, got 99"),
])
def test_errors_say_what_was_expected(args, message, tmp_path, capsys):
    assert main(["plan", *args, "-o", str(tmp_path / "never.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stratagem plan: error:") and message in err
    assert not (tmp_path / "never.json").exists()


@pytest.mark.parametrize("algorithm, extra", [("mcmc", ["--budget-s", "0.5", "--seed", "3"]), ("tofu", [])])
def test_the_randomized_and_recursive_searches_by_name(algorithm, extra, tmp_path):
    path = tmp_path / f"{algorithm}.json"
    assert main(["plan", "rnn-tiny", "--devices", "2", "--algorithm", algorithm, *extra, "-o", str(path)]) == 0
    plan = Plan.load(path)
    assert plan.algorithm == algorithm and plan.num_devices == 2
    if algorithm == "mcmc":
        assert plan.details["proposals"] > 0      # the budget itself: tests/search/test_mcmc.py
