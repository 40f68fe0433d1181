"""Plans (a strategy with its predicted costs) and frontiers, as values and as JSON files.

A plan file carries `format_version`, the graph it was made for (so `simulate` and `explain` need
no model code), the cluster, the strategy (space.Strategy: per op its device block and mesh axes,
per edge its tensor-reuse choice), and both costs: the additive one of TensorOpt Eq. 3
(`additive_time_s`, `additive_memory_bytes`) and the simulated one (`iteration_time_s`,
`peak_memory_bytes`). Writes go to a temporary file first and are renamed into place, so a crash
never leaves half a plan.

Versions: 5 (this one) adds "offload_activations" (blocks whose saved activations go to host
memory until backward; absent: none); 4 may hold "pipeline" under "strategy" ({"cuts": [op, ...], "micro_batches": m,
"schedule": "gpipe" | "1f1b"}; absent: no stages), and the graph is then one micro-batch's; 3 added
weight states, the precision and recomputed blocks; 2 nests the strategy's dimensions under
"strategy" ({"ops": ..., "reuse": ...}); 1 had the per-op configurations as "strategy" and "reuse"
beside it. Older versions are read by migrating them (`migrate`: what they lack is the default);
a newer version is refused with what to do. A new strategy dimension is a
new key under "strategy", a version up, and a migration step from the last version.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from stratagem import values
from stratagem.cost.activation_offload import check_offload
from stratagem.cost.oplayouts import OpLayouts
from stratagem.cost.recompute import check_recompute
from stratagem.cost.weight_state import check_state
from stratagem.errors import ConfigError, StratagemError
from stratagem.fields import Fields
from stratagem.files import atomic_write_json, parse_json, read_text
from stratagem.ir import Graph, check_precision, graph_from_dict, graph_to_dict
from stratagem.space import (
    Configuration, Edge, Level, Pipeline, Strategy, as_strategy, check_pipeline, check_strategy,
)

FORMAT_VERSION = 5      # 5: offloaded activations (4's: none); 4: pipeline stages (3's: none); 3: weight
                        # states, precision, recomputed blocks


@dataclass(frozen=True)
class Plan:
    graph: Graph = field(repr=False)
    cluster: str                                   # preset name or cluster file path
    num_devices: int
    strategy: Strategy = field(repr=False)           # a per-op mapping is made a Strategy
    iteration_time_s: float = float("nan")         # simulated
    peak_memory_bytes: float = float("nan")        # simulated, largest device
    additive_time_s: float = float("nan")          # TensorOpt Eq. 3
    additive_memory_bytes: float = float("nan")
    algorithm: str = ""
    optimizer: str = "adam"
    model: str = ""                                # zoo name when built from the zoo
    details: Mapping[str, Any] = field(default_factory=dict, repr=False)
    precision: str = "fp32"                        # ir.precision.PRECISIONS; `graph` computes in it
    recompute: tuple[str, ...] = ()                # blocks recomputed in backward (cost.recompute)
    offload_activations: tuple[str, ...] = ()      # blocks whose activations wait in host memory
                                                   # for backward (cost.activation_offload)

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", as_strategy(self.strategy))
        check_precision(self.precision)
        object.__setattr__(self, "recompute", tuple(self.recompute))
        object.__setattr__(self, "offload_activations", tuple(self.offload_activations))

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
            "precision": self.precision, "recompute": list(self.recompute),
            "offload_activations": list(self.offload_activations), "algorithm": self.algorithm, "iteration_time_s": self.iteration_time_s,
            "peak_memory_bytes": self.peak_memory_bytes, "additive_time_s": self.additive_time_s,
            "additive_memory_bytes": self.additive_memory_bytes,
            "strategy": strategy_to_dict(self.strategy), "details": dict(self.details),
        }
        if with_graph:
            out["graph"] = graph_to_dict(self.graph)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], graph: Graph | None = None, source: str = "plan file") -> "Plan":
        """A plan from its JSON record; every field checked, a bad one named (`source`: the file)."""
        top = Fields.of(migrate(Fields.of(data, source)), source)
        graph = _graph(top) if top.has("graph") else graph or _graph(top)
        num_devices = top.integer("num_devices")
        strategy = _strategy(top.sub("strategy"), graph, num_devices)
        return cls(graph, top.text("cluster"), num_devices, strategy, _recorded(top, "iteration_time_s"),
                   _recorded(top, "peak_memory_bytes"), _recorded(top, "additive_time_s", NAN),
                   _recorded(top, "additive_memory_bytes", NAN), _string(top, "algorithm"),
                   top.text("optimizer", "adam"), _string(top, "model"),
                   dict(top.sub("details").data) if top.has("details") else {}, _precision(top),
                   _recompute(top, graph), _offload_activations(top, graph))

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "Plan":
        return cls.from_dict(read_json(path), source=str(path))


class Frontier(Sequence):
    """Plans on the time / peak-memory frontier, memory ascending and time descending. Its file
    holds the graph once; a plan of another graph (one with pipeline stages holds one micro-batch's)
    holds its own.
    `alternatives`: simulated plans from outside the search (data parallel) that the choices
    (`search.modes`) also weigh, so a plan chosen is never slower than the simplest one;
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
                "plans": [p.to_dict(with_graph=p.graph is not graph) for p in self._plans],
                "alternatives": [p.to_dict(with_graph=p.graph is not graph) for p in self.alternatives]}

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "Frontier":
        top = Fields.of(migrate(Fields.of(read_json(path), str(path))), str(path))
        graph = _graph(top) if top.raw("graph", None) is not None else None
        details = top.sub("details").data if top.has("details") else {}
        return cls(_plans(top, "plans", graph), details, _plans(top, "alternatives", graph, []))


def strategy_to_dict(strategy: Strategy) -> dict[str, Any]:
    out = {"ops": {op: config_to_dict(c) for op, c in strategy.ops.items()},
           "reuse": {str(edge): option for edge, option in strategy.reuse.items()}}
    if strategy.pipeline is not None:
        p = strategy.pipeline
        out["pipeline"] = {"cuts": list(p.cuts), "micro_batches": p.micro_batches, "schedule": p.schedule}
    return out


def config_to_dict(config: Configuration) -> dict[str, Any]:
    found = {"first_device": config.first_device, "levels": [[level.dim, level.size] for level in config.levels]}
    if config.sharded_state:
        found["state"] = config.state
    return found


def config_from_dict(data: Mapping[str, Any]) -> Configuration:
    try:
        levels = tuple(Level(_dim(d), values.integer(s, "mesh axis size")) for d, s in data["levels"])
        state = data.get("state", "replicated")
        if not isinstance(state, str):
            raise TypeError(f"state {state!r}")
        return Configuration(levels, values.integer(data["first_device"], "first device", minimum=0), state)
    except (KeyError, TypeError, ValueError) as error:
        raise ConfigError("configuration record is malformed",
                          expected='{"first_device": int, "levels": [[dim or null, size], ...], '
                                   '"state": "sharded" | "sharded_kept" | "offloaded" (optional)}',
                          got=repr(data)) from error


def _dim(dim: Any) -> str | None:
    if dim is not None and not isinstance(dim, str):
        raise TypeError(f"dim {dim!r}")
    return dim


NAN = float("nan")


def _in_field(f: Fields, key: str, error: StratagemError) -> ConfigError:
    """`error`, said of field `key` of the file."""
    return ConfigError(f"{f.named(key)}: {error.what}", expected=error.expected, got=error.got, hint=error.hint)


def _graph(f: Fields) -> Graph:
    try:
        return graph_from_dict(f.raw("graph"))
    except StratagemError as error:
        raise _in_field(f, "graph", error) from None


def _strategy(f: Fields, graph: Graph, num_devices: int) -> Strategy:
    ops = f.sub("ops")
    strategy = Strategy({op: _config(ops, op, num_devices) for op in ops.data}, _reuse(f), _pipeline(f))
    try:
        check_strategy(graph, strategy)
    except ConfigError as error:
        raise _in_field(ops, "", error) from None
    if strategy.pipeline is not None:
        try:
            check_pipeline(graph, strategy, strategy.pipeline, num_devices)
        except ConfigError as error:
            raise _in_field(f, "pipeline", error) from None
    sharded = [op for op, config in strategy.items() if config.sharded_state]
    layouts = OpLayouts(graph) if sharded else None
    for op in sharded:
        try:
            check_state(graph, layouts, op, strategy[op])
        except ConfigError as error:
            raise _in_field(ops, op, error) from None
    return strategy


def _pipeline(f: Fields) -> Pipeline | None:
    if not f.has("pipeline"):
        return None
    record = f.sub("pipeline")
    cuts = record.raw("cuts")
    if not isinstance(cuts, list) or not all(isinstance(c, str) for c in cuts) or not cuts:
        raise record.error("cuts", "a non-empty list of op names (the first op of each stage after the first)", cuts)
    try:
        return Pipeline(tuple(cuts), record.raw("micro_batches"), record.text("schedule", "1f1b"))
    except ConfigError as error:
        raise _in_field(f, "pipeline", error) from None


def _reuse(f: Fields) -> dict[Edge, str]:
    table = f.sub("reuse") if f.has("reuse") else Fields({}, f.source, f.where("reuse"))
    out = {}
    for name, option in table.data.items():
        if not isinstance(option, str):
            raise table.error(str(name), "a reuse option name (a string)", option)
        try:
            out[Edge.parse(str(name))] = option
        except ConfigError as error:
            raise _in_field(table, str(name), error) from None
    return out


def _config(f: Fields, op: str, num_devices: int) -> Configuration:
    record = f.sub(op).data
    try:
        config = config_from_dict(record)
    except ConfigError as error:
        raise _in_field(f, op, error) from None
    if config.devices.stop > num_devices:
        raise f.error(op, f"a configuration on devices 0..{num_devices - 1} (num_devices is {num_devices})",
                      str(config))
    return config


def _recompute(f: Fields, graph: Graph) -> tuple[str, ...]:
    names = f.raw("recompute", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise f.error("recompute", "a list of block names (module-list elements, e.g. \"layers.0\")", names)
    try:
        return check_recompute(graph, names)
    except StratagemError as error:
        raise _in_field(f, "recompute", error) from None


def _offload_activations(f: Fields, graph: Graph) -> tuple[str, ...]:
    names = f.raw("offload_activations", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise f.error("offload_activations", "a list of block names (module-list elements, e.g. \"layers.0\")", names)
    try:
        return check_offload(graph, names, f.raw("recompute", []))
    except StratagemError as error:
        raise _in_field(f, "offload_activations", error) from None


def _precision(f: Fields) -> str:
    value = f.text("precision", "fp32")
    try:
        return check_precision(value)
    except StratagemError as error:
        raise _in_field(f, "precision", error) from None


def _recorded(f: Fields, key: str, default: Any = ...) -> float:
    """A cost the plan records: a number >= 0, or NaN where it was not simulated."""
    value = f.raw(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise f.error(key, "a number >= 0 (NaN when not simulated)", value)
    return float(value)


def _string(f: Fields, key: str) -> str:
    value = f.raw(key, "")
    if not isinstance(value, str):
        raise f.error(key, "a string", value)
    return value


def _plans(f: Fields, key: str, graph: Graph | None, default: Any = ...) -> list[Plan]:
    records = f.sequence(key, default)
    if graph is None and records:
        raise f.error("graph", "the graph the plans were made for", None)
    return [Plan.from_dict(record, graph, f"{f.source}: {key}[{i}]") for i, record in enumerate(records)]


def migrate(f: Fields) -> Mapping[str, Any]:
    """A plan or frontier record of any version this stratagem reads, as the current version."""
    version = _version(f)
    data = dict(f.data)
    if version == 1 and "strategy" in data:         # a plan (a frontier's plans migrate one by one)
        data["strategy"] = {"ops": data["strategy"], "reuse": data.pop("reuse", {})}
    return {**data, "format_version": FORMAT_VERSION}


def _version(f: Fields) -> int:
    version = f.raw("format_version", None)
    if version in (1, 2, 3, 4, FORMAT_VERSION) and not isinstance(version, bool):
        return version
    newer = isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION
    raise ConfigError(f"{f.source}: unsupported plan file version", expected=f"format_version {FORMAT_VERSION} "
                      "(or 1 to 4, which it migrates)", got=repr(version),
                      hint="Upgrade stratagem to read it" if newer else
                      "Write the plan again with this version of stratagem (`stratagem plan MODEL -o FILE`)")


def read_json(path: str | Path) -> Any:
    return parse_json(read_text(path, "file"), path)
