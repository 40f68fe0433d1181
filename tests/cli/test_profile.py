"""`stratagem profile ops` resolves MODEL through the zoo, with a clear error while there is none."""

from __future__ import annotations

import importlib.util

import pytest

from stratagem.cli import main


@pytest.mark.skipif(importlib.util.find_spec("stratagem.frontend.zoo") is not None,
                    reason="the model zoo exists in this checkout")
def test_profile_ops_without_a_zoo_is_a_clear_error(capsys):
    assert main(["profile", "ops", "mlp"]) == 2
    assert "model zoo (stratagem.frontend.zoo) is not in this checkout" in capsys.readouterr().err


def test_profile_comm_needs_two_processes(capsys):
    assert main(["profile", "comm", "--nproc", "1"]) == 2
    assert "at least 2 processes" in capsys.readouterr().err
