"""Measured op times (FlexFlow §5, assumption A1): each distinct local op measured once.

An entry's key is what decides a kernel's time: (op kind, local input shapes, input dtypes,
attributes, which inputs need gradients). An entry may also record its op's `Work` (the FLOPs and
bytes the cost model prices it by), so that an op of the same kind at a size never measured is
estimated from the measured sizes around it (cost.interpolate). `ProfileRequest` is one such op
to measure (the core decides which, `profile_requests`); stratagem/runtime/profile_ops.py measures
requests with torch and writes a `ComputeTable`, which the cost model prefers to the roofline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stratagem.errors import ConfigError
from stratagem.files import atomic_write_json
from stratagem.ir import Attrs

FORMAT_VERSION = 1
Key = tuple[str, tuple[tuple[int, ...], ...], tuple[str, ...], Attrs, tuple[bool, ...]]


@dataclass(frozen=True)
class Work:
    """What the roofline prices one device's share of an op by (cost.compute.OpWork): its FLOPs,
    and the bytes its forward reads and writes (random numbers' masks included)."""
    flops: float
    num_bytes: float


@dataclass(frozen=True)
class ProfileRequest:
    kind: str
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    attrs: Attrs
    requires_grad: tuple[bool, ...]
    output_shape: tuple[int, ...]
    work: Work | None = field(default=None, compare=False)    # recorded with its measurement

    @property
    def key(self) -> Key:
        return (self.kind, self.input_shapes, self.input_dtypes, self.attrs, self.requires_grad)

    def __str__(self) -> str:
        args = ", ".join(f"{dt}{list(s)}{'*' if g else ''}"
                         for s, dt, g in zip(self.input_shapes, self.input_dtypes, self.requires_grad))
        return f"{self.kind}({args}) -> {list(self.output_shape)}"


@dataclass(frozen=True)
class OpTiming:
    forward_time_s: float
    backward_time_s: float       # 0 when no input needs a gradient
    repeats: int
    work: Work | None = None     # the measured op's work; None in tables written before it was kept


@dataclass(frozen=True)
class RuntimeOverhead:
    """The runtime's own time around each kernel (DTensor wrapping, runtime.profile_overhead): per
    op, and per input it unwraps (forward) or hands a gradient back to (backward)."""
    forward_time_s: float
    backward_time_s: float
    repeats: int
    forward_per_input_s: float = 0.0
    backward_per_gradient_s: float = 0.0

    def forward_s(self, inputs: int) -> float:
        return self.forward_time_s + self.forward_per_input_s * inputs

    def backward_s(self, gradients: int) -> float:
        """Nothing for an op none of whose inputs needs a gradient (no backward runs)."""
        return self.backward_time_s + self.backward_per_gradient_s * gradients if gradients else 0.0


@dataclass(frozen=True)
class ComputeTable:
    device_kind: str
    entries: Mapping[Key, OpTiming]
    # the runtime's own time per op beyond its kernel (DTensor wrapping: runtime.profile_overhead),
    # added to every op priced with this table; None: not measured
    runtime_overhead: RuntimeOverhead | None = None

    def lookup(self, request: ProfileRequest) -> OpTiming | None:
        return self.entries.get(request.key)

    def __len__(self) -> int:
        return len(self.entries)

    def merged(self, other: "ComputeTable") -> "ComputeTable":
        return ComputeTable(self.device_kind, {**self.entries, **other.entries},
                            other.runtime_overhead or self.runtime_overhead)

    def to_json(self) -> dict[str, Any]:
        rows = []
        for (kind, shapes, dtypes, attrs, grads), t in self.entries.items():
            rows.append({"kind": kind, "input_shapes": [list(s) for s in shapes], "input_dtypes": list(dtypes),
                         "attrs": attrs.to_json(), "requires_grad": list(grads),
                         "forward_time_s": t.forward_time_s, "backward_time_s": t.backward_time_s,
                         "repeats": t.repeats, **_work_json(t.work)})
        overhead = self.runtime_overhead
        extra = {} if overhead is None else {"runtime_overhead": {
            "forward_time_s": overhead.forward_time_s, "backward_time_s": overhead.backward_time_s,
            "repeats": overhead.repeats, "forward_per_input_s": overhead.forward_per_input_s,
            "backward_per_gradient_s": overhead.backward_per_gradient_s}}
        return {"format_version": FORMAT_VERSION, "table": "ops", "device_kind": self.device_kind,
                "entries": rows, **extra}

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.to_json())

    @staticmethod
    def load(path: str | Path) -> "ComputeTable":
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise ConfigError(f"op time table {str(path)!r} cannot be read", got=str(error),
                              hint="Write one with `stratagem profile ops MODEL -o FILE`") from None
        return ComputeTable.from_json(data, str(path))

    @staticmethod
    def from_json(data: Any, source: str = "<table>") -> "ComputeTable":
        if not isinstance(data, Mapping) or data.get("table") != "ops":
            raise ConfigError(f"{source}: not an op time table", expected='"table": "ops"',
                              got=repr(data.get("table") if isinstance(data, Mapping) else data))
        if data.get("format_version") != FORMAT_VERSION:
            raise ConfigError(f"{source}: field 'format_version'", expected=str(FORMAT_VERSION),
                              got=repr(data.get("format_version")))
        entries = {}
        overhead = None
        if data.get("runtime_overhead") is not None:
            row = data["runtime_overhead"]
            try:
                overhead = RuntimeOverhead(float(row["forward_time_s"]), float(row["backward_time_s"]),
                                           int(row["repeats"]), float(row.get("forward_per_input_s", 0.0)),
                                           float(row.get("backward_per_gradient_s", 0.0)))
            except (KeyError, TypeError, ValueError) as error:
                raise ConfigError(f"{source}: field 'runtime_overhead' is not valid", got=repr(error)) from None
        for i, row in enumerate(data.get("entries", ())):
            try:
                key = (row["kind"], tuple(tuple(s) for s in row["input_shapes"]), tuple(row["input_dtypes"]),
                       Attrs(row["attrs"]), tuple(bool(g) for g in row["requires_grad"]))
                entries[key] = OpTiming(float(row["forward_time_s"]), float(row["backward_time_s"]),
                                        int(row["repeats"]), _work_from(row))
            except (KeyError, TypeError, ValueError) as error:
                raise ConfigError(f"{source}: field 'entries[{i}]' is not valid", got=repr(error)) from None
        return ComputeTable(str(data.get("device_kind", "")), entries, overhead)


def _work_json(work: Work | None) -> dict[str, float]:
    return {} if work is None else {"flops": work.flops, "num_bytes": work.num_bytes}


def _work_from(row: Mapping[str, Any]) -> Work | None:
    if "flops" not in row and "num_bytes" not in row:
        return None
    return Work(float(row["flops"]), float(row["num_bytes"]))
