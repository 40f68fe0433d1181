"""Tofu's recursive partitioning (Tofu §5.2, Appendix A) against enumeration of step sequences."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from stratagem.search.context import context
from stratagem.search.planner import search
from stratagem.search.tofu import Tofu, factors
from stratagem.space import Configuration, Level
from tests.search.graphs import chain, unrolled

# linear ops x[b, k] * w[j, k]: each index addresses one dim of each input, no halos (Appendix A)
GRAPHS = {"chain-3": chain(3, 64, 128), "chain-3-thin": chain(3, 256, 32), "chain-3-small-batch": chain(3, 4, 32),
          "unrolled-2": unrolled(2, 64, 128)}


def brute_force(tofu: Tofu, num_workers: int) -> float:
    """Least C(P) over every sequence of basic plans valid after the steps before it, each step
    priced on its own prefix (nothing assumes that steps are independent)."""
    parts = factors(num_workers)
    best = float("inf")

    def walk(i, prefix, spent):
        nonlocal best
        if i == len(parts):
            best = min(best, spent)
            return
        choices = tofu.choices(prefix, parts[i])
        problem = tofu.step_problem(choices)
        for combo in itertools.product(*(range(len(d)) for d in choices.dims)):
            walk(i + 1, tuple(choices.nested[n][c].levels for n, c in enumerate(combo)),
                 spent + problem.evaluate(combo)[1])

    walk(0, tofu.empty_prefix(), 0.0)
    return best


def test_factors_are_largest_first():
    assert factors(8) == (2, 2, 2) and factors(12) == (3, 2, 2) and factors(6) == (3, 2) and factors(1) == ()


def test_basic_plan_bytes_by_hand():
    """chain(2): x1[64, 128] fp32 between fc0 and fc1, weights 128 x 128 fp32 = 65,536 bytes each."""
    tofu = Tofu(context(chain(2, 64, 128), "p100-4x4", devices=2).model)
    step = [(2, ("b", "b"))]
    assert tofu.sequence_bytes(step) == 2 * 2 * 65536          # both weights replicated: 2 (k - 1) |W| each
    assert tofu.sequence_bytes([(2, ("j", "k"))]) == 0          # x1 split on its columns, read so
    # fc1 splits j: each half needs all of x1 and holds half (forward 64 x 64 per worker), and
    # its input gradient is partial: each half receives the other's 64 x 64 (backward)
    assert tofu.sequence_bytes([(2, ("j", "j"))]) == 4 * (2 * 64 * 64 + 2 * 64 * 64)


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("num_workers", [4, 8])
def test_recursion_equals_brute_force_over_sequences(name, num_workers):
    tofu = Tofu(context(GRAPHS[name], "p100-4x4", devices=num_workers).model)
    result = tofu.run(num_workers)
    assert result.communication_bytes == pytest.approx(brute_force(tofu, num_workers))
    assert result.communication_bytes == pytest.approx(
        tofu.sequence_bytes([(s.parts, s.dims) for s in result.steps]))


def test_small_batch_runs_out_of_batch_splits():
    """batch 4 splits at most twice: at 8 workers the third step must split another dim."""
    result = Tofu(context(chain(3, 4, 32), "p100-4x4", devices=8).model).run(8)
    fc0 = result.strategy["fc0"]
    assert fc0.num_devices == 8 and fc0.degree("b") <= 4


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_theorem_1_steps_commute(name):
    tofu = Tofu(context(GRAPHS[name], "p100-4x4", devices=4).model)
    choices = tofu.choices(tofu.empty_prefix(), 2)
    plans = list(itertools.product(*choices.dims))
    rng = np.random.default_rng(0)
    for _ in range(25):
        p1, p2 = (plans[i] for i in rng.integers(len(plans), size=2))
        assert tofu.sequence_bytes([(2, p1), (2, p2)]) == pytest.approx(tofu.sequence_bytes([(2, p2), (2, p1)]))


def test_plan_nests_the_steps_outermost_first_and_simulates():
    plan = search(chain(3, 4, 32), "p100-4x4", algorithm="tofu", devices=8)
    dims = plan.details["step_dims"]
    for n, op in enumerate(["fc0", "fc1", "fc2"]):
        assert plan.strategy[op] == Configuration(tuple(Level(step[n], 2) for step in dims))
    assert plan.algorithm == "tofu" and np.isfinite(plan.iteration_time_s)
    assert plan.details["tofu_bytes"] == pytest.approx(sum(plan.details["step_bytes"]))


@pytest.mark.parametrize("name", ["gpt-tiny", "wideresnet-tiny"])
def test_nodes_of_one_structure_share_their_step_choices(name):
    """Nodes with equal structure (search.repeats.signature) take an earlier node's choices,
    members renamed by position: the same as computing every node's own."""
    import warnings

    from stratagem import zoo
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = zoo.build(name)
    tofu = Tofu(context(graph, "k80-1x8", 4).model, runnable=True)
    shared = len(set(tofu._structure))
    assert shared < len(tofu.nodes)           # the model has repeated nodes
    prefix = tuple(() for _ in tofu.nodes)
    found = tofu.choices(prefix, 2)
    tofu._structure = tuple(range(len(tofu.nodes)))
    assert tofu.choices(prefix, 2) == found
