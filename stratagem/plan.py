"""Plans (a strategy with its predicted costs) and frontiers, as values and as JSON files.

A plan file carries `format_version`, the graph it was made for (so `simulate` and `explain` need
no model code), the cluster, the strategy (per op: its device block and mesh axes), the tensor-reuse
choices, and both costs: the additive one of TensorOpt Eq. 3 (`additive_time_s`,
`additive_memory_bytes`) and the simulated one (`iteration_time_s`, `peak_memory_bytes`).
Writes go to a temporary file first and are renamed into place, so a crash never leaves half a plan.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from stratagem.errors import ConfigError
from stratagem.ir import Graph, graph_from_dict, graph_to_dict
from stratagem.space import Configuration, Level

FORMAT_VERSION = 1


@dataclass(frozen=True)
class Plan:
    graph: Graph = field(repr=False)
    cluster: str                                   # preset name or cluster file path
    num_devices: int
    strategy: Mapping[str, Configuration] = field(repr=False)
    iteration_time_s: float = float("nan")         # simulated
    peak_memory_bytes: float = float("nan")        # simulated, largest device
    additive_time_s: float = float("nan")          # TensorOpt Eq. 3
    additive_memory_bytes: float = float("nan")
    algorithm: str = ""
    optimizer: str = "adam"
    reuse: Mapping[str, str] = field(default_factory=dict, repr=False)   # "tensor:src->dst" -> option
    model: str = ""                                # zoo name when built from the zoo
    details: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def with_simulation(self, result) -> "Plan":
        details = dict(self.details)
        details.update(peak_memory_per_device=list(result.peak_memory_per_device),
                       communication_time_s=result.communication_time_s,
                       communication_bytes=result.communication_bytes,
                       compute_time_s=result.compute_time_s, num_tasks=result.num_tasks)
        return replace(self, iteration_time_s=result.iteration_time_s,
                       peak_memory_bytes=result.peak_memory_bytes, details=details)

    def summary(self) -> str:
        return (f"{self.graph.name} on {self.cluster} ({self.num_devices} devices), {self.algorithm}: "
                f"{self.iteration_time_s * 1e3:.2f} ms/iteration, "
                f"{self.peak_memory_bytes / 2**30:.2f} GiB peak per device")

    # ---- JSON ---------------------------------------------------------------------------------
    def to_dict(self, with_graph: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format_version": FORMAT_VERSION, "model": self.model or self.graph.name,
            "cluster": self.cluster, "num_devices": self.num_devices, "optimizer": self.optimizer,
            "algorithm": self.algorithm, "iteration_time_s": self.iteration_time_s,
            "peak_memory_bytes": self.peak_memory_bytes, "additive_time_s": self.additive_time_s,
            "additive_memory_bytes": self.additive_memory_bytes,
            "strategy": {op: config_to_dict(c) for op, c in self.strategy.items()},
            "reuse": dict(self.reuse), "details": dict(self.details),
        }
        if with_graph:
            out["graph"] = graph_to_dict(self.graph)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], graph: Graph | None = None) -> "Plan":
        _check_version(data)
        try:
            graph = graph or graph_from_dict(data["graph"])
            strategy = {op: config_from_dict(c) for op, c in data["strategy"].items()}
            missing = [op.name for op in graph.ops if op.name not in strategy]
            if missing:
                raise ConfigError("plan strategy does not cover the graph",
                                  expected="a configuration for every op", got=f"none for {missing[:5]}")
            return cls(graph, data["cluster"], int(data["num_devices"]), strategy,
                       float(data["iteration_time_s"]), float(data["peak_memory_bytes"]),
                       float(data.get("additive_time_s", "nan")),
                       float(data.get("additive_memory_bytes", "nan")), data.get("algorithm", ""),
                       data.get("optimizer", "adam"), dict(data.get("reuse", {})), data.get("model", ""),
                       dict(data.get("details", {})))
        except KeyError as error:
            raise ConfigError("plan file lacks a field", expected="a file written by Plan.save",
                              got=f"no {error.args[0]!r}") from None

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "Plan":
        return cls.from_dict(read_json(path))


class Frontier(Sequence):
    """Plans on the time / peak-memory frontier, memory ascending and time descending.
    `alternatives`: simulated plans from outside the search (data parallel) that the choices
    (`planner.mini_time`) also weigh, so a plan chosen is never slower than the simplest one;
    they are not frontier points and are not iterated."""

    def __init__(self, plans: Sequence[Plan], details: Mapping[str, Any] | None = None,
                 alternatives: Sequence[Plan] = ()):
        self._plans = tuple(sorted(plans, key=lambda p: (p.additive_memory_bytes, p.additive_time_s)))
        self.details = dict(details or {})
        self.alternatives = tuple(alternatives)

    def __getitem__(self, index):
        return self._plans[index]

    def __len__(self) -> int:
        return len(self._plans)

    def __iter__(self) -> Iterator[Plan]:
        return iter(self._plans)

    @property
    def min_time(self) -> Plan:
        return min(self._plans, key=lambda p: (p.iteration_time_s, p.peak_memory_bytes))

    @property
    def min_memory(self) -> Plan:
        return min(self._plans, key=lambda p: (p.peak_memory_bytes, p.iteration_time_s))

    def to_dict(self) -> dict[str, Any]:
        graph = self._plans[0].graph if self._plans else None
        return {"format_version": FORMAT_VERSION, "details": self.details,
                "graph": graph_to_dict(graph) if graph is not None else None,
                "plans": [p.to_dict(with_graph=False) for p in self._plans],
                "alternatives": [p.to_dict(with_graph=False) for p in self.alternatives]}

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "Frontier":
        data = read_json(path)
        _check_version(data)
        graph = graph_from_dict(data["graph"]) if data.get("graph") else None
        return cls([Plan.from_dict(p, graph) for p in data["plans"]], data.get("details"),
                   [Plan.from_dict(p, graph) for p in data.get("alternatives", [])])


def config_to_dict(config: Configuration) -> dict[str, Any]:
    return {"first_device": config.first_device,
            "levels": [[level.dim, level.size] for level in config.levels]}


def config_from_dict(data: Mapping[str, Any]) -> Configuration:
    try:
        return Configuration(tuple(Level(d, int(s)) for d, s in data["levels"]), int(data["first_device"]))
    except (KeyError, TypeError, ValueError) as error:
        raise ConfigError("configuration record is malformed",
                          expected='{"first_device": int, "levels": [[dim or null, size], ...]}',
                          got=repr(data)) from error


def _check_version(data: Mapping[str, Any]) -> None:
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise ConfigError("unsupported plan file version", expected=str(FORMAT_VERSION), got=repr(version),
                          hint="Re-create the plan with this version of stratagem")


def read_json(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"no such file {str(path)!r}") from None
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path} is not valid JSON", got=f"{error.msg} at line {error.lineno}",
                          hint="Plan files are written by `stratagem plan -o`") from None


def atomic_write_json(path: str | Path, data: Mapping[str, Any]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=1, allow_nan=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
