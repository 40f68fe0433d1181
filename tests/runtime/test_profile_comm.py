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
    assert set(table.dispatch_s) == {"move", "sync"} and all(t >= 0 for t in table.dispatch_s.values())
    assert measured.concurrent_collective_time_s("all_reduce", 64, ((0, 1),), "move") == pytest.approx(
        table.time_s("all_reduce", 64, ((0, 1),)) + table.dispatch_s["move"])


def test_partitionings_of_four_ranks():
    from stratagem.runtime.profile_comm import element_count, partitionings
    assert set(partitionings(4)) == {((0, 1, 2, 3),), ((0, 2), (1, 3)), ((0, 1), (2, 3))}
    assert element_count("all_gather", 16, 8) == 8 and element_count("all_reduce", 16, 8) == 4


def test_a_collective_is_timed_as_a_step_reaches_it():
    """A collective that is slower when ranks come to it from compute (here: it sleeps 20 ms after
    the burst, not after a barrier) is recorded at its in-step time; without the burst, at the
    barrier-aligned time; the options refuse a negative compute time."""
    import time
    import torch.distributed as dist
    from stratagem.errors import ConfigError
    from stratagem.runtime.profile_comm import CommProfileOptions, _measure, compute_burst
    made = not dist.is_initialized()
    if made:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        import torch
        after = {"burst": False}
        burst_matmuls = compute_burst(1e-6, torch.device("cpu"))

        def burst():
            burst_matmuls()
            after["burst"] = True

        def collective():
            time.sleep(0.02 if after["burst"] else 0.0)
            after["burst"] = False

        options = CommProfileOptions(repeats=3, warmup=0)
        assert compute_burst(0.0, torch.device("cpu")) is None
        assert _measure(collective, options, torch.device("cpu")) < 0.01
        assert _measure(collective, options, torch.device("cpu"), burst) >= 0.015
        with pytest.raises(ConfigError, match="after_compute_s"):
            CommProfileOptions(after_compute_s=-1.0)
    finally:
        if made:
            dist.destroy_process_group()


def test_dispatch_is_the_dtensor_time_beyond_the_collectives_per_collective(monkeypatch):
    """`dispatch_times` times each path's DTensor call against the same collectives on plain
    tensors and divides by the collectives it issues: a move (forward all-gather, backward
    reduce-scatter) 2, a sync 1; never below 0. The calls themselves run on a 1-rank group."""
    import torch
    import torch.distributed as dist
    from stratagem.runtime import profile_comm
    made = not dist.is_initialized()
    if made:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        seconds = {"sync_dtensor": 5e-3, "sync_plain": 2e-3, "move_dtensor": 9e-3, "move_plain": 4e-3}
        calls = []

        def loop_s(fn, repeats, device):
            fn()
            calls.append(fn.__name__)
            return seconds[fn.__name__]
        monkeypatch.setattr(profile_comm, "_loop_s", loop_s)
        options = profile_comm.CommProfileOptions(repeats=2, warmup=0)
        found = profile_comm.dispatch_times(options, torch.device("cpu"))
        assert found == pytest.approx({"sync": 3e-3, "move": 2.5e-3})
        assert sorted(set(calls)) == sorted(seconds)
        seconds["move_plain"] = 2e-2
        assert profile_comm.dispatch_times(options, torch.device("cpu"))["move"] == 0.0
    finally:
        if made:
            dist.destroy_process_group()
