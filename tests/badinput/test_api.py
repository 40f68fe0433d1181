"""Bad values through the Python API (sg.cluster, sg.frontier, sg.find_strategy, sg.search,
sg.simulate, sg.zoo, RunOptions): each raises a StratagemError that says what was expected and
what came, the same message the CLI prints; or the result is checked to be correct."""

from __future__ import annotations

import math

import pytest

import stratagem as sg
from stratagem.errors import StratagemError
from stratagem.runtime.session import RunOptions
from stratagem.space import Configuration

from .helpers import assert_says

C = "cpu-1x2"
DEVICES = "device count on cluster 'cpu-1x2' is not valid: expected an integer in 1..2"
CAP = "memory cap is not valid: expected a size > 0"


def refused(call, *fragments: str) -> StratagemError:
    with pytest.raises(StratagemError) as error:
        call()
    assert_says(str(error.value), *fragments)
    return error.value


@pytest.mark.parametrize("value, fragments", [
    (None, ["cluster not understood", "expected a preset name or a path", "got None"]),
    (42, ["cluster not understood", "got 42"]),
    ("v100-2x88", ["no cluster preset 'v100-2x88'", "Did you mean v100-2x8"]),
    ("", ["no cluster preset ''"]),
])
def test_cluster_refuses_what_is_not_a_cluster(value, fragments):
    refused(lambda: sg.cluster(value), *fragments)


@pytest.mark.parametrize("devices", [0, -1, 3, 2.5, "2", True])
def test_frontier_refuses_device_counts_outside_the_cluster(graph, devices):
    refused(lambda: sg.frontier(graph, C, devices=devices), DEVICES, f"got {devices!r}")


def test_frontier_names_the_closest_optimizer(graph):
    refused(lambda: sg.frontier(graph, C, optimizer="adamm"), "unknown optimizer 'adamm'",
            "expected one of adam, adamw, momentum, sgd", "Did you mean adam")


def test_frontier_refuses_a_model_name_for_a_graph():
    refused(lambda: sg.frontier("mlp-tiny", C), "not a graph", "sg.zoo.build(name)", "got str")


def test_frontier_refuses_a_number_for_a_cluster(graph):
    refused(lambda: sg.frontier(graph, 42), "cluster not understood", "got 42")


@pytest.mark.parametrize("cap", [0, -1, -1e9, math.nan, math.inf, "0GB", "-16GB", "lots", True])
def test_find_strategy_refuses_memory_caps_that_are_not_sizes(graph, cap):
    refused(lambda: sg.find_strategy(graph, C, memory_cap_bytes=cap), CAP, f"got {cap!r}")


def test_find_strategy_refuses_a_cap_above_device_memory(graph):
    refused(lambda: sg.find_strategy(graph, C, memory_cap_bytes=1e15), "memory cap is above the devices' memory",
            "expected at most 23.00 GiB (a cpu of cluster 'cpu-1x2')", "got 931322.57 GiB")


def test_a_cap_given_as_text_is_the_same_cap_in_bytes(graph):
    as_text = sg.find_strategy(graph, C, memory_cap_bytes="16GB")
    as_bytes = sg.find_strategy(graph, C, memory_cap_bytes=16e9)
    assert as_text.strategy == as_bytes.strategy and as_text.peak_memory_bytes <= 16e9


def test_a_cap_below_every_plan_is_nothing_fits_not_a_default(graph):
    leanest = sg.frontier(graph, C).min_memory.peak_memory_bytes
    refused(lambda: sg.find_strategy(graph, C, memory_cap_bytes=leanest / 2), "no plan fits the memory cap")


@pytest.mark.parametrize("mode", ["fast", None, "", 3])
def test_find_strategy_refuses_unknown_modes(graph, mode):
    refused(lambda: sg.find_strategy(graph, C, mode=mode), f"unknown mode {mode!r}",
            "expected one of mini_time, mini_parallelism, profiling")


@pytest.mark.parametrize("mode", ["mini_parallelism", "profiling"])
def test_zero_devices_is_refused_in_every_mode(graph, mode):
    refused(lambda: sg.find_strategy(graph, C, mode=mode, devices=0), DEVICES, "got 0")


@pytest.mark.parametrize("device_range, fragments", [
    ((0, 2), [DEVICES, "got 0"]),
    ((1, 8), [DEVICES, "got 8"]),
    ((2, 1), ["device_range is not valid", "expected fewest <= most", "got (2, 1)"]),
    ("12", ["device_range is not valid", "got '12'"]),
])
def test_profiling_refuses_bad_device_ranges(graph, device_range, fragments):
    refused(lambda: sg.find_strategy(graph, C, mode="profiling", device_range=device_range), *fragments)


def test_profiling_over_a_valid_range_plans_each_count(graph):
    table = sg.find_strategy(graph, C, mode="profiling", device_range=(1, 2))
    assert sorted(table) == [1, 2] and all(table[n].num_devices == n for n in table)


@pytest.mark.parametrize("kwargs, fragments", [
    ({"algorithm": "mcmcc"}, ["unknown search algorithm 'mcmcc'", "Did you mean mcmc"]),
    ({"algorithm": "mcmc", "budget_s": 0}, ["MCMC budget_s is not valid", "expected a finite number > 0", "got 0"]),
    ({"algorithm": "mcmc", "budget_s": -1}, ["MCMC budget_s is not valid", "got -1"]),
    ({"algorithm": "mcmc", "budget_s": math.nan}, ["MCMC budget_s is not valid", "got nan"]),
    ({"algorithm": "mcmc", "budget_s": math.inf}, ["MCMC budget_s is not valid", "got inf"]),
    ({"algorithm": "mcmc", "budget_s": 1, "seed": -1}, ["MCMC seed is not valid", "got -1"]),
    ({"algorithm": "mcmc", "budget_s": None, "max_proposals": 0}, ["MCMC max_proposals is not valid", "got 0"]),
    ({"algorithm": "mcmc", "budget": 1}, ["search algorithm 'mcmc' takes no option 'budget'", "Did you mean budget_s"]),
    ({"algorithm": "mcmc", "budget_s": 1, "memory_cap_bytes": 0}, [CAP, "got 0"]),
    ({"algorithm": "ft", "bogus": 1}, ["search algorithm 'ft' takes no option 'bogus'"]),
    ({"algorithm": "ft", "spaces": 1}, ["takes no option 'spaces'", "Did you mean space"]),
    ({"algorithm": "data-parallel", "seed": 1}, ["'data-parallel' takes no option 'seed'", "expected no options"]),
    ({"algorithm": "exhaustive", "max_time_s": 0}, ["exhaustive max_time_s is not valid", "got 0"]),
    ({"algorithm": "tofu", "devices": 0}, [DEVICES, "got 0"]),
])
def test_search_refuses_bad_algorithms_and_options(graph, kwargs, fragments):
    refused(lambda: sg.search(graph, C, **kwargs), *fragments)


def test_simulate_refuses_an_empty_strategy(graph):
    refused(lambda: sg.simulate(graph, C, {}), "strategy lacks ops", "none for ['linear'")


def test_simulate_refuses_a_strategy_missing_an_op(graph, dp_plan):
    strategy = {op: c for op, c in dp_plan.strategy.items() if op != "relu"}
    refused(lambda: sg.simulate(graph, C, strategy), "strategy lacks ops", "none for ['relu']")


def test_simulate_refuses_a_strategy_naming_an_op_the_graph_lacks(graph, dp_plan):
    strategy = {**dp_plan.strategy, "relu_9": dp_plan.strategy["relu"]}
    refused(lambda: sg.simulate(graph, C, strategy), "strategy names ops graph 'mlp-tiny' does not have",
            "got ['relu_9']", "Did you mean relu")


def test_simulate_refuses_a_list_for_a_strategy(graph, dp_plan):
    refused(lambda: sg.simulate(graph, C, list(dp_plan.strategy.values())), "strategy is not valid",
            "expected a Strategy or a mapping from op name to Configuration", "got list")


def test_simulate_refuses_text_for_a_configuration(graph, dp_plan):
    refused(lambda: sg.simulate(graph, C, {**dp_plan.strategy, "relu": "b2"}),
            "strategy has values that are not configurations", "got str for ['relu']")


@pytest.mark.parametrize("devices, fragments", [
    (0, [DEVICES, "got 0"]),
    (-2, [DEVICES, "got -2"]),
    (1, ["uses devices beyond the model's 1"]),
])
def test_simulate_refuses_device_counts_the_strategy_does_not_fit(graph, dp_plan, devices, fragments):
    refused(lambda: sg.simulate(graph, C, dp_plan.strategy, devices=devices), *fragments)


def test_simulate_refuses_a_cluster_with_fewer_devices_than_the_strategy(graph, dp_plan):
    refused(lambda: sg.simulate(graph, "cpu-1x1", dp_plan.strategy), "device count on cluster 'cpu-1x1'",
            "expected an integer in 1..1", "got 2")


def test_simulate_of_a_plan_reproduces_its_recorded_costs(graph, dp_plan):
    result = sg.simulate(graph, C, dp_plan.strategy, with_trace=False)
    assert result.iteration_time_s == dp_plan.iteration_time_s
    assert result.peak_memory_bytes == dp_plan.peak_memory_bytes


def test_simulate_refuses_a_configuration_on_devices_the_plan_lacks(graph, dp_plan):
    strategy = {**dp_plan.strategy, "relu": Configuration.of(2, b=2)}
    refused(lambda: sg.simulate(graph, "cpu-1x4", strategy, devices=2), "uses devices beyond the model's 2")


@pytest.mark.parametrize("name, fragments", [
    ("mlp-tinyy", ["no model 'mlp-tinyy' in the zoo", "mlp-tiny", "stratagem models"]),
    (None, ["a zoo model is named by a string", "got None"]),
    (["mlp"], ["a zoo model is named by a string", "got ['mlp']"]),
])
def test_zoo_refuses_unknown_models(name, fragments):
    refused(lambda: sg.zoo.build(name), *fragments)


@pytest.mark.parametrize("batch_size", [0, -1, 2.5, True, "8"])
def test_zoo_refuses_batch_sizes_that_are_not_counts(batch_size):
    refused(lambda: sg.zoo.build("mlp-tiny", batch_size=batch_size), "batch size is not valid",
            "expected an integer >= 1", f"got {batch_size!r}")


def test_a_batch_size_is_the_graph_batch(graph):
    assert sg.zoo.build("mlp-tiny", batch_size=3).tensors["features"].shape == (3, 16)


@pytest.mark.parametrize("options, fragments", [
    ({"steps": 0}, ["steps is not valid", "got 0"]),
    ({"steps": 5, "warmup": 5}, ["warmup (of 5 steps) is not valid", "expected an integer in 0..4", "got 5"]),
    ({"nproc": 0}, ["nproc is not valid", "got 0"]),
    ({"lr": math.nan}, ["learning rate is not valid", "got nan"]),
    ({"timeout_s": math.inf}, ["timeout (seconds) is not valid", "got inf"]),
    ({"relaunches": -1}, ["relaunches is not valid", "got -1"]),
])
def test_run_options_refuse_bad_values(options, fragments):
    refused(lambda: RunOptions(**options), *fragments)


def test_warmup_defaults_to_one_step_only_when_one_is_left_to_time():
    assert RunOptions(steps=1).warmup == 0 and RunOptions(steps=5).warmup == 1
    assert RunOptions(steps=5, warmup=0).warmup == 0 and RunOptions(lr=0.0).lr == 0.0
