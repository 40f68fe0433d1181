"""Random search against brute force: its plan is the fastest fitting strategy among those it drew
(each priced by enumeration over the whole space), never faster than the space's optimum, and it
says when none of its draws fits."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stratagem.search import registry
from stratagem.search.context import NothingFits, context
from stratagem.search.random_search import RandomOptions, drawn, random_search
from tests.search.graphs import chain
from tests.search.oracle import best_time, enumerate_times


@pytest.fixture(scope="module")
def small():
    ctx = context(chain(2), "p100-4x4", devices=4)
    options = RandomOptions(samples=40, seed=3, coarsen=False, runnable=False)
    space, assignments = drawn(ctx, options)
    return ctx, options, space, assignments, enumerate_times(ctx.model, space)


def test_the_plan_is_the_fastest_of_its_draws_and_no_faster_than_the_optimum(small):
    ctx, options, space, assignments, times = small
    plan = random_search(ctx, options)
    fastest_drawn = min(times[a][0] for a in assignments)
    assert plan.iteration_time_s == pytest.approx(fastest_drawn, rel=1e-12)
    assert plan.iteration_time_s >= best_time(times) * (1 - 1e-12)
    assert plan.algorithm == "random" and plan.details["samples"] == 40


def test_draws_over_the_cap_are_not_chosen(small):
    ctx, options, space, assignments, times = small
    fastest = min(assignments, key=lambda a: times[a][0])
    cap = times[fastest][1] * 0.999
    fitting = [times[a][0] for a in assignments if times[a][1] <= cap]
    if not fitting:
        pytest.skip("every draw is over the cap this tight")
    plan = random_search(replace(ctx, memory_cap_bytes=cap), options)
    assert plan.iteration_time_s == pytest.approx(min(fitting), rel=1e-12) and plan.peak_memory_bytes <= cap


def test_it_says_so_when_nothing_drawn_fits(small):
    ctx, options, *_ = small
    with pytest.raises(NothingFits, match="none of 40 random strategies fits"):
        random_search(replace(ctx, memory_cap_bytes=1.0), options)


def test_it_is_registered_with_its_options():
    assert registry.make_options("random", {"samples": "7"}) == RandomOptions(samples=7)
    with pytest.raises(Exception, match="takes no option 'sample'.*Did you mean samples"):
        registry.make_options("random", {"sample": 7})
