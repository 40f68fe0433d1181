"""`stratagem profile comm` with 2 gloo ranks writes a table that changes collective times."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stratagem.cluster import CommTable, load

pytest.importorskip("torch.distributed")
ROOT = str(Path(__file__).resolve().parents[2])


def test_two_gloo_ranks_profile_and_the_table_is_preferred(tmp_path):
    out = tmp_path / "comm.json"
    command = [sys.executable, "-m", "stratagem", "profile", "comm", "--nproc", "2", "--min-exp", "4",
               "--max-exp", "7", "--repeats", "3", "--warmup", "1", "--kinds", "all_reduce",
               "all_gather", "-o", str(out)]
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run(command, env=env, timeout=180, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    table = CommTable.load(out)
    assert (table.backend, table.world_size, table.device_kind) == ("gloo", 2, "cpu")
    assert set(table.series) == {("all_reduce", ((0, 1),)), ("all_gather", ((0, 1),))}
    series = table.series[("all_reduce", ((0, 1),))]
    assert series.sizes_bytes == (16.0, 32.0, 64.0, 128.0) and all(t > 0 for t in series.times_s)
    plain, measured = load("cpu-1x2"), load("cpu-1x2", comm_table=out)
    for n in (16, 48, 100, 1000):
        expected = table.time_s("all_reduce", n, ((0, 1),))
        assert measured.collective_time_s("all_reduce", n, [0, 1]) == expected
        assert measured.collective_time_s("all_reduce", n, [0, 1]) != plain.collective_time_s("all_reduce", n, [0, 1])
    assert measured.collective_time_s("broadcast", 64, [0, 1]) == plain.collective_time_s("broadcast", 64, [0, 1])


def test_partitionings_of_four_ranks():
    from stratagem.runtime.profile_comm import element_count, partitionings
    assert set(partitionings(4)) == {((0, 1, 2, 3),), ((0, 2), (1, 3)), ((0, 1), (2, 3))}
    assert element_count("all_gather", 16, 8) == 8 and element_count("all_reduce", 16, 8) == 4
