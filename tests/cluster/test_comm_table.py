"""Profiled tables: bandwidth interpolation between 2^i and 2^(i+1), and precedence over the model."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratagem.cluster import CommTable, load
from stratagem.cluster.comm_table import Series
from stratagem.errors import ConfigError

SERIES = Series((1024.0, 2048.0, 4096.0), (1e-4, 1e-4, 1.6e-4))


def test_interpolates_bandwidth_linearly():
    # at 1536 B: bandwidth halfway between 10.24 MB/s and 20.48 MB/s = 15.36 MB/s
    assert SERIES.time_s(1536) == pytest.approx(1536 / 15.36e6)
    assert SERIES.time_s(2048) == pytest.approx(1e-4)
    assert SERIES.time_s(512) == pytest.approx(1e-4)                  # below: smallest time
    assert SERIES.time_s(8192) == pytest.approx(8192 * 1.6e-4 / 4096)   # above: last bandwidth


@settings(max_examples=50, deadline=None)
@given(st.floats(1024, 4096))
def test_interpolated_bandwidth_lies_between_neighbours(k):
    bandwidth = k / SERIES.time_s(k)
    measured = [s / t for s, t in zip(SERIES.sizes_bytes, SERIES.times_s)]
    assert min(measured) * (1 - 1e-9) <= bandwidth <= max(measured) * (1 + 1e-9)


def test_table_takes_precedence_only_for_its_partitioning(tmp_path):
    table = CommTable("gloo", 2, "cpu", {("all_reduce", ((0, 1),)): SERIES})
    path = tmp_path / "t.json"
    table.save(path)
    plain, measured = load("cpu-1x4"), load("cpu-1x4", comm_table=path)
    assert measured.collective_time_s("all_reduce", 2048, [1, 0]) == pytest.approx(1e-4)
    assert plain.collective_time_s("all_reduce", 2048, [0, 1]) != pytest.approx(1e-4)
    for kind, group in (("all_gather", [0, 1]), ("all_reduce", [2, 3])):
        assert measured.collective_time_s(kind, 2048, group) == plain.collective_time_s(kind, 2048, group)
    assert measured.collective_estimate("all_reduce", 2048, [(0, 1)]).source == "table"


def test_bad_tables_are_rejected(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"table": "comm", "format_version": 1, "entries": '
                    '[{"collective": "all_reduce", "groups": [[0, 1]], "sizes_bytes": [8, 4], "times_s": [1, 1]}]}')
    with pytest.raises(ConfigError, match=r"entries\[0\]"):
        CommTable.load(path)
    path.write_text('{"table": "ops"}')
    with pytest.raises(ConfigError, match="not a communication table"):
        CommTable.load(path)


def test_a_measured_dip_is_made_monotone_in_size():
    dip = Series((1024.0, 2048.0, 4096.0, 8192.0), (3.6e-3, 3.0e-3, 1.6e-3, 4.3e-3))
    assert dip.times_s == pytest.approx((2.7333e-3, 2.7333e-3, 2.7333e-3, 4.3e-3), rel=1e-4)
    times = [dip.time_s(s) for s in (1024, 1536, 2048, 3000, 4096, 6000, 8192, 16384)]
    assert all(a <= b * (1 + 1e-12) for a, b in zip(times, times[1:]))


def test_dispatch_is_added_by_the_path_the_runtime_issues_a_collective_on(tmp_path):
    """A table's dispatch times (the runtime's DTensor time around each collective) are added to
    a collective priced as a move or a sync, by that path, to none priced alone or sent point to
    point; they survive a save and load; a table without them adds nothing."""
    groups = ((0, 1),)
    table = CommTable("gloo", 2, "cpu", {("all_reduce", groups): SERIES, ("send_recv", groups): SERIES},
                      {"move": 2e-3, "sync": 5e-4})
    alone = SERIES.time_s(2048)
    assert table.time_s("all_reduce", 2048, groups) == alone
    assert table.time_s("all_reduce", 2048, groups, "move") == pytest.approx(alone + 2e-3)
    assert table.time_s("all_reduce", 2048, groups, "sync") == pytest.approx(alone + 5e-4)
    assert table.time_s("send_recv", 2048, groups, "move") == alone
    path = tmp_path / "t.json"
    table.save(path)
    assert CommTable.load(path).dispatch_s == {"move": 2e-3, "sync": 5e-4}
    measured = load("cpu-1x2", comm_table=path)
    assert measured.concurrent_collective_time_s("all_reduce", 2048, groups, "sync") == pytest.approx(alone + 5e-4)
    older = CommTable("gloo", 2, "cpu", {("all_reduce", groups): SERIES})
    assert older.time_s("all_reduce", 2048, groups, "move") == alone


@pytest.mark.parametrize("dispatch", ['{"move": -1}', '{"other": 1}', '1e-3', '{"sync": "1"}'])
def test_bad_dispatch_times_are_rejected(tmp_path, dispatch):
    path = tmp_path / "t.json"
    path.write_text('{"table": "comm", "format_version": 1, "dispatch_s": ' + dispatch + ', "entries": []}')
    with pytest.raises(ConfigError, match="dispatch_s.*\\n?.*expected.*move"):
        CommTable.load(path)
