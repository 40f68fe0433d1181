"""Profiled collective times per device partitioning and message size (TensorOpt §3.2).

A device partitioning is the set of groups that run one collective at the same time (the groups of
one mesh axis). The table holds, per (collective, partitioning), times measured at sizes 2^i.
For a size k with 2^i <= k < 2^(i+1) the bandwidth is interpolated linearly between the measured
bandwidths at 2^i and 2^(i+1), and t = k / bandwidth (`CommTable.time_s`). Below the smallest
measured size the smallest size's time is used (latency dominates there); above the largest, its
bandwidth. Written by `stratagem profile comm` (stratagem/runtime/profile_comm.py).

The series time the collective itself (torch.distributed on plain tensors). The runtime issues
every collective through DTensor, whose Python dispatch around it (sharding propagation, the
redistribute plan, the wrapping, under autograd its nodes) is time of its own, measured once per
table by `profile_comm.dispatch_times` for the two ways the runtime issues one (`ISSUED`):
    "move"   a tensor moved into a consumer's layout in forward, or its gradient moved back in
             backward (runtime.move: DTensor.redistribute under autograd; a sharded weight's
             gather for its reader, and its gradient's reduce-scatter, are such a move)
    "sync"   a replicated weight's gradient synchronized to its parameter's placements after
             backward (a redistribute outside autograd)
`time_s(..., issued)` adds that path's dispatch to the collective's time; send_recv, which the
pipeline runtime issues through torch.distributed.pipelining, gets none.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stratagem.errors import ConfigError
from stratagem.monotone import non_decreasing
from stratagem.files import atomic_write_json

FORMAT_VERSION = 1
Groups = tuple[tuple[int, ...], ...]
ISSUED = ("move", "sync")        # how the runtime issues a collective (the module's docstring)


def normalize_groups(groups: Iterable[Iterable[int]]) -> Groups:
    return tuple(sorted(tuple(sorted(int(d) for d in g)) for g in groups))


@dataclass(frozen=True)
class Series:
    """Measured times of one collective by message size. The times are made non-decreasing in size
    (least squares, `monotone.non_decreasing`): a larger message never takes less time, and a
    noisy point below its neighbours (gloo on a loaded CPU) would price one size at a fraction of
    the next."""
    sizes_bytes: tuple[float, ...]    # ascending
    times_s: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "times_s", tuple(non_decreasing(self.times_s)))

    def time_s(self, num_bytes: float) -> float:
        sizes, times = self.sizes_bytes, self.times_s
        if num_bytes <= sizes[0]:
            return times[0]
        if num_bytes >= sizes[-1]:
            return num_bytes * times[-1] / sizes[-1]
        i = bisect.bisect_right(sizes, num_bytes) - 1
        bw0, bw1 = sizes[i] / times[i], sizes[i + 1] / times[i + 1]
        bandwidth = bw0 + (bw1 - bw0) * (num_bytes - sizes[i]) / (sizes[i + 1] - sizes[i])
        return num_bytes / bandwidth


@dataclass(frozen=True)
class CommTable:
    backend: str
    world_size: int
    device_kind: str
    series: Mapping[tuple[str, Groups], Series]
    dispatch_s: Mapping[str, float] = field(default_factory=dict)   # per ISSUED path; none: 0

    def time_s(self, kind: str, num_bytes: float, groups: Groups, issued: str | None = None) -> float | None:
        """The collective's time at this size, plus the runtime's dispatch when `issued` says how
        the runtime issues it (None: the collective alone)."""
        found = self.series.get((kind, groups))
        if found is None:
            return None
        dispatch = 0.0 if issued is None or kind == "send_recv" else self.dispatch_s.get(issued, 0.0)
        return found.time_s(num_bytes) + dispatch

    def __contains__(self, key: tuple[str, Groups]) -> bool:
        return key in self.series

    # ---- files -----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"format_version": FORMAT_VERSION, "table": "comm", "backend": self.backend,
                "world_size": self.world_size, "device_kind": self.device_kind, "dispatch_s": dict(self.dispatch_s),
                "entries": [{"collective": kind, "groups": [list(g) for g in groups],
                             "sizes_bytes": list(s.sizes_bytes), "times_s": list(s.times_s)}
                            for (kind, groups), s in sorted(self.series.items())]}

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.to_json())

    @staticmethod
    def load(path: str | Path) -> "CommTable":
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise ConfigError(f"communication table {str(path)!r} cannot be read", got=str(error),
                              hint="Write one with `stratagem profile comm -o FILE`") from None
        return CommTable.from_json(data, str(path))

    @staticmethod
    def from_json(data: Any, source: str = "<table>") -> "CommTable":
        if not isinstance(data, Mapping) or data.get("table") != "comm":
            raise ConfigError(f"{source}: not a communication table", expected='"table": "comm"',
                              got=repr(data.get("table") if isinstance(data, Mapping) else data))
        if data.get("format_version") != FORMAT_VERSION:
            raise ConfigError(f"{source}: field 'format_version'", expected=str(FORMAT_VERSION),
                              got=repr(data.get("format_version")))
        series = {}
        for i, entry in enumerate(data.get("entries", ())):
            series[(entry["collective"], normalize_groups(entry["groups"]))] = _series(entry, source, i)
        return CommTable(str(data.get("backend", "")), int(data.get("world_size", 0)),
                         str(data.get("device_kind", "")), series, _dispatch_s(data.get("dispatch_s", {}), source))


def _dispatch_s(value: Any, source: str) -> dict[str, float]:
    """The table's dispatch times by path: none (0) where a table from before they were measured has none."""
    valid = isinstance(value, Mapping) and set(value) <= set(ISSUED) and all(
        not isinstance(v, bool) and isinstance(v, (int, float)) and 0 <= v < float("inf") for v in value.values())
    if not valid:
        raise ConfigError(f"{source}: field 'dispatch_s' is not valid",
                          expected=f"seconds >= 0 by path, keys among {list(ISSUED)}", got=repr(value),
                          hint="Write the table again with `stratagem profile comm -o FILE`")
    return {k: float(v) for k, v in value.items()}


def _series(entry: Mapping[str, Any], source: str, i: int) -> Series:
    sizes, times = entry.get("sizes_bytes"), entry.get("times_s")
    valid = (isinstance(sizes, list) and isinstance(times, list) and sizes and len(sizes) == len(times)
             and all(s > 0 for s in sizes) and all(t > 0 for t in times)
             and sizes == sorted(set(sizes)))
    if not valid:
        raise ConfigError(f"{source}: field 'entries[{i}]' is not valid",
                          expected="sizes_bytes ascending and times_s, equal lengths, all > 0",
                          got=f"sizes_bytes={sizes!r}, times_s={times!r}")
    return Series(tuple(float(s) for s in sizes), tuple(float(t) for t in times))
