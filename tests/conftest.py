"""Shared fixtures. Every graph a test builds or captures goes through `checked`."""

from __future__ import annotations

import os
import tempfile

import pytest

from stratagem.tdl.graphops import check_graph


@pytest.fixture(autouse=True, scope="session")
def _temporary_folders_under_pytest(tmp_path_factory):
    """Temporary folders made without a place given (a run's default output folder, torchrun's
    own) go under pytest's base temp, which pytest prunes, not into the system's temp folder;
    workers launched by the tests inherit TMPDIR."""
    folder = str(tmp_path_factory.mktemp("tmp"))
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"], tempfile.tempdir = folder, folder
    yield
    tempfile.tempdir = None
    if saved is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved


@pytest.fixture
def checked():
    def check(graph):
        check_graph(graph)
        return graph
    return check


# Test modules whose module-scoped fixture runs for minutes (a whole frontier of a paper model):
# they start first, and all their tests run on one worker (`--dist loadgroup` in pyproject's
# addopts), so that under `pytest -n 2` the fixture is built once while the other worker takes
# the rest of the suite.
LONG_MODULES = ("tests/search/test_transformer_frontier.py",)
# Modules whose module-scoped fixture launches gloo runs: their tests run on one worker too, so the
# runs are launched once (not first: they are shorter than the long ones).
LAUNCHING_MODULES = ("tests/runtime/test_same_training.py", "tests/runtime/test_sharded_state.py",
                     "tests/runtime/test_recompute.py", "tests/runtime/test_mixed_precision.py",
                     "tests/runtime/test_pipeline.py")


@pytest.hookimpl(tryfirst=True)     # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    def is_long(item):
        return any(item.nodeid.startswith(m) for m in LONG_MODULES)
    for item in items:
        if is_long(item) or item.nodeid.startswith(LAUNCHING_MODULES):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    items.sort(key=lambda item: not is_long(item))     # stable: the rest keep their order
