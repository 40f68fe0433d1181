"""Shared fixtures. Every graph a test builds or captures goes through `checked`."""

from __future__ import annotations

import pytest

from stratagem.tdl.graphops import check_graph


@pytest.fixture
def checked():
    def check(graph):
        check_graph(graph)
        return graph
    return check
