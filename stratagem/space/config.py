"""Configurations (FlexFlow's c_i, TensorOpt's s_i^k): how one operator is parallelized.

A configuration puts an op on a contiguous, aligned block of devices [first, first + n) arranged
as a mesh whose axes are `levels`, outermost first (device index = row-major mesh coordinates).
Each level either splits one of the op's dims (`Level("b", 4)`: 4 parts of dim b) or replicates
the computation (`Level(None, 2)`). Adjacent levels on the same dim merge, so two configurations
are equal exactly when every device computes the same region (the canonical form).

`layout(analysis, config)` derives the placements that follow from the TDL analysis: per mesh axis,
the output is S(d) for a split output dim, P(reducer) for a split reduction dim, R for a
replicated level; each input gets the placement `Analysis.split` derived (R, S(d), or None when
the split is valid but not expressible as a DTensor placement, e.g. a convolution halo).

`state` says how the op's own trainable weights are held across its data-parallel axes (the mesh
axes on which a weight's gradient is a partial sum: the op reads the weight whole there), as
ZeRO-3 / FSDP2 do (ZeRO, Rajbhandari et al. 2020, §5; space.state_sharding for which ops may):
    "replicated"    every device holds the weight, its gradient and optimizer state (data
                    parallelism's all-reduce of gradients)
    "sharded"       weight, gradient and optimizer state are held in 1/p shards; the weight is
                    all-gathered before the op's forward and again before its backward, freed after
                    each; the gradient is reduce-scattered (FSDP's reshard_after_forward=True)
    "sharded_kept"  as "sharded", but the weight gathered for forward is kept until the op's
                    backward (no second gather; FSDP's reshard_after_forward=False)
    "offloaded"     as "sharded", with the shards of weight, gradient and optimizer state in host
                    memory: each shard is copied to the device before each gather, the gradient's
                    shard back to the host after its reduce-scatter, and the optimizer steps on
                    the host CPU (FSDP2's CPUOffloadPolicy; ZeRO-Offload, Ren et al. 2021)
It changes no placement of the op's inputs and outputs: `base` is the configuration without it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from stratagem.errors import ConfigError
from stratagem.space.placement import REPLICATE, Placement, format_placements, gradient_placement, parse_placement


@dataclass(frozen=True)
class Level:
    dim: str | None
    size: int

    def __str__(self) -> str:
        return f"{self.dim or 'rep'}{self.size}"


STATES = ("replicated", "sharded", "sharded_kept", "offloaded")


@dataclass(frozen=True)
class Configuration:
    levels: tuple[Level, ...] = ()
    first_device: int = 0
    state: str = "replicated"

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", canonical_levels(self.levels))
        if self.state not in STATES:
            raise ConfigError("unknown weight state", expected=" | ".join(STATES), got=repr(self.state))
        n = self.num_devices
        if self.first_device < 0 or self.first_device % n:
            raise ConfigError("configuration device block is not aligned",
                              expected=f"first device a multiple of {n}", got=str(self.first_device))

    def __hash__(self) -> int:
        """Cached: configurations key the cost model's tables (a pickle drops the cache, as
        string hashes differ between processes)."""
        found = self.__dict__.get("_hash")
        if found is None:
            found = hash((self.levels, self.first_device, self.state))
            object.__setattr__(self, "_hash", found)
        return found

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    @staticmethod
    def of(first_device: int = 0, **degrees: int) -> "Configuration":
        """Shorthand for one level per dim, in keyword order: Configuration.of(b=2, j=4)."""
        return Configuration(tuple(Level(None if d == "rep" else d, s) for d, s in degrees.items()),
                             first_device)

    @cached_property
    def num_devices(self) -> int:
        return math.prod(level.size for level in self.levels)

    @property
    def base(self) -> "Configuration":
        """This configuration with its weights replicated (what placements and edges depend on)."""
        return self if self.state == "replicated" else Configuration(self.levels, self.first_device)

    def with_state(self, state: str) -> "Configuration":
        return self if state == self.state else Configuration(self.levels, self.first_device, state)

    @property
    def sharded_state(self) -> bool:
        return self.state != "replicated"

    @property
    def regathers(self) -> bool:
        """Whether the weights gathered for forward are freed after it and gathered again for backward."""
        return self.state in ("sharded", "offloaded")

    @property
    def offloaded(self) -> bool:
        return self.state == "offloaded"

    @cached_property
    def mesh_shape(self) -> tuple[int, ...]:
        return tuple(level.size for level in self.levels)

    @cached_property
    def devices(self) -> range:
        return range(self.first_device, self.first_device + self.num_devices)

    def degree(self, dim: str) -> int:
        return math.prod(level.size for level in self.levels if level.dim == dim)

    @property
    def degrees(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for level in self.levels:
            if level.dim is not None:
                out[level.dim] = out.get(level.dim, 1) * level.size
        return out

    @property
    def replication(self) -> int:
        return math.prod(level.size for level in self.levels if level.dim is None)

    def coordinates(self, device: int) -> tuple[int, ...]:
        """Mesh coordinates of a device of this configuration."""
        offset = device - self.first_device
        if not 0 <= offset < self.num_devices:
            raise ConfigError(f"device {device} is not used by configuration {self}")
        coords = []
        for size in reversed(self.mesh_shape):
            coords.append(offset % size)
            offset //= size
        return tuple(reversed(coords))

    def part(self, device: int, dim: str) -> tuple[int, int]:
        """(index, count) of the part of `dim` that `device` computes."""
        index, count = 0, 1
        for level, c in zip(self.levels, self.coordinates(device)):
            if level.dim == dim:
                index, count = index * level.size + c, count * level.size
        return index, count

    def __str__(self) -> str:
        body = "x".join(str(level) for level in self.levels) or "single"
        last = self.first_device + self.num_devices - 1
        where = f"@{self.first_device}" if last == self.first_device else f"@{self.first_device}-{last}"
        return body + where + ("" if self.state == "replicated" else f"/{self.state}")


def canonical_levels(levels: tuple[Level, ...] | list[Level]) -> tuple[Level, ...]:
    merged: list[Level] = []
    for level in levels:
        if level.size < 1:
            raise ConfigError("mesh axis of size < 1", got=str(level))
        if level.size == 1:
            continue
        if merged and merged[-1].dim == level.dim:
            merged[-1] = Level(level.dim, merged[-1].size * level.size)
        else:
            merged.append(Level(level.dim, level.size))
    return tuple(merged)


@dataclass(frozen=True)
class OpLayout:
    """Per mesh axis placements of an op's inputs and outputs under one configuration."""

    config: Configuration
    inputs: tuple[tuple[Placement | None, ...], ...]   # [input][axis]; None = irregular
    outputs: tuple[Placement, ...]                     # [axis] (every output alike)
    splits: tuple[bool, ...]                           # [axis]: does this axis split a dim?

    @property
    def is_regular(self) -> bool:
        return all(p is not None for per_input in self.inputs for p in per_input)

    @cached_property
    def input_gradients(self) -> tuple[tuple[Placement | None, ...], ...]:
        return tuple(tuple(None if p is None else gradient_placement(p, s)
                           for p, s in zip(per_input, self.splits)) for per_input in self.inputs)

    @cached_property
    def output_gradient(self) -> tuple[Placement, ...]:
        return tuple(gradient_placement(p, False) for p in self.outputs)

    def __str__(self) -> str:
        ins = ", ".join("?" if None in p else format_placements(p) for p in self.inputs)
        return f"{self.config}: ({ins}) -> {format_placements(self.outputs)}"


def layout(analysis, config: Configuration) -> OpLayout:
    """Placements implied by `config` for the analyzed op; raises if a level's split is invalid."""
    inputs: list[list[Placement | None]] = [[] for _ in analysis.desc.inputs]
    outputs: list[Placement] = []
    for level in config.levels:
        if level.dim is None:
            outputs.append(REPLICATE)
            for per_input in inputs:
                per_input.append(REPLICATE)
            continue
        split = analysis.split(level.dim, config.degree(level.dim))
        outputs.append(parse_placement(split.output_placement))
        for per_input, p in zip(inputs, split.placements):
            per_input.append(None if p is None else parse_placement(p))
    return OpLayout(config, tuple(tuple(p) for p in inputs), tuple(outputs),
                    tuple(level.dim is not None for level in config.levels))


