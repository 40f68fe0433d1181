"""Plan and frontier files made once per session through the CLI, for the commands that read them:
rnn-tiny on 2 devices of v100-2x8 (FT's least-time plan that fits, data parallel, the frontier)."""

from __future__ import annotations

import pytest

from stratagem.cli import main


@pytest.fixture(scope="session")
def plan_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plans")
    files = {"ft": folder / "ft.json", "dp": folder / "dp.json", "frontier": folder / "frontier.json"}
    assert main(["plan", "rnn-tiny", "--devices", "2", "-o", str(files["ft"])]) == 0
    assert main(["plan", "rnn-tiny", "--devices", "2", "--algorithm", "data-parallel", "-o", str(files["dp"])]) == 0
    assert main(["frontier", "rnn-tiny", "--devices", "2", "-o", str(files["frontier"])]) == 0
    return files
