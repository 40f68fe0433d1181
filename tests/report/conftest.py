"""Plans shared by the report tests: rnn-tiny on 2 devices of v100-2x8 (FT's fastest plan and the
data-parallel one), made once per session."""

from __future__ import annotations

import warnings

import pytest

import stratagem as sg
from stratagem.search.context import context
from stratagem.search.ft_search import frontier
from stratagem.search.baselines import data_parallel


@pytest.fixture(scope="session")
def tiny_ctx():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = sg.zoo.build("rnn-tiny")
    return context(graph, "v100-2x8", 2)


@pytest.fixture(scope="session")
def tiny_frontier(tiny_ctx):
    return frontier(tiny_ctx)


@pytest.fixture(scope="session")
def ft_plan(tiny_frontier):
    return tiny_frontier.min_memory


@pytest.fixture(scope="session")
def dp_plan(tiny_ctx):
    return data_parallel(tiny_ctx)
