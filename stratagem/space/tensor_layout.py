"""Where a tensor lives: a device block seen as a row-major mesh, and a placement per mesh axis.

A `TensorLayout` is the producer's output or a consumer's input under a configuration: the block
[first, first + prod(mesh)), device index = first + row-major mesh coordinates, and one placement
per axis (S(d), R, P(sum); None where the analysis found a valid but irregular split, e.g. a
convolution halo, in which case `boxes` gives every device's region explicitly).

When several axes shard one dim, the outer axis splits first (DTensor's default shard order, and
`Configuration.part`): a device's chunk index of dim d is the mixed-radix number of its coordinates
on the axes sharding d, outermost most significant; the chunk is [i*n//k, (i+1)*n//k)
(`device_box`), the same even split as `Analysis.chunk`.

`refine` puts two layouts on different meshes over the same block onto their coarsest common
refinement: each axis split into sub-axes (row-major, so an axis of 4 becomes 2 x 2 with the same
device order), the cut points being the union of both meshes' prefix products; it exists when each
cut divides the next. A placement on an axis holds on each of its sub-axes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np

from stratagem.space.config import OpLayout
from stratagem.space.placement import REPLICATE, Partial, Placement, Shard

Box = tuple[tuple[int, int], ...]      # per dim, half-open [start, stop)


@dataclass(frozen=True)
class TensorLayout:
    first_device: int
    mesh_shape: tuple[int, ...]
    placements: tuple[Placement | None, ...]
    boxes: tuple[Box, ...] | None = None     # per device of the block, when irregular

    def __hash__(self) -> int:
        """Cached: layouts key the re-scheduling and cost tables (a pickle drops the caches, as
        string hashes differ between processes)."""
        found = self.__dict__.get("_hash")
        if found is None:
            found = hash((self.first_device, self.mesh_shape, self.placements, self.boxes))
            object.__setattr__(self, "_hash", found)
        return found

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    @property
    def num_devices(self) -> int:
        return math.prod(self.mesh_shape)

    @property
    def _degrees(self) -> dict[int, int]:
        """Shard degree per sharded dim, computed once."""
        found = self.__dict__.get("_shard_degrees")
        if found is None:
            found = {}
            for size, p in zip(self.mesh_shape, self.placements):
                if isinstance(p, Shard):
                    found[p.dim] = found.get(p.dim, 1) * size
            object.__setattr__(self, "_shard_degrees", found)
        return found

    @property
    def devices(self) -> range:
        return range(self.first_device, self.first_device + self.num_devices)

    @property
    def is_regular(self) -> bool:
        return all(p is not None for p in self.placements)

    @property
    def has_partial(self) -> bool:
        return any(isinstance(p, Partial) for p in self.placements)

    def coordinates(self, device: int) -> tuple[int, ...]:
        offset, coords = device - self.first_device, []
        for size in reversed(self.mesh_shape):
            coords.append(offset % size)
            offset //= size
        return tuple(reversed(coords))

    def pieces(self, shape: tuple[int, ...]) -> tuple[np.ndarray, tuple[tuple[int, ...], ...]]:
        """The distinct blocks of the value: boxes [pieces, dims, 2] and each one's holders (devices
        with equal coordinates on every axis that is not R hold the same block of the same value;
        on a P axis the blocks are summands), in order of first holder; computed once per shape."""
        cache = self._cache("_pieces")
        found = cache.get(shape)
        if found is None:
            coords = self.all_coordinates()[:, [a for a, p in enumerate(self.placements) if p != REPLICATE]]
            _, first, which = np.unique(coords, axis=0, return_index=True, return_inverse=True)
            order = np.argsort(first, kind="stable")
            which = which.reshape(-1)
            holders = tuple(tuple(int(self.first_device + d) for d in np.flatnonzero(which == k)) for k in order)
            found = cache[shape] = (_frozen(self.device_boxes(shape)[first[order]]), holders)
        return found

    def all_coordinates(self) -> np.ndarray:
        """Every device's mesh coordinates, [devices, axes] int64 in device order."""
        cache = self._cache("_coordinates")
        if not cache:
            rest, coords = np.arange(self.num_devices, dtype=np.int64), []
            for size in reversed(self.mesh_shape):
                coords.append(rest % size)
                rest = rest // size
            cache[None] = _frozen(np.stack(coords[::-1], axis=1) if coords else
                                  np.zeros((self.num_devices, 0), np.int64))
        return cache[None]

    def axis_groups(self, axes: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        """Device groups that differ only in the coordinates of `axes` (flattened together), each
        in device order, ordered by their first device; computed once per `axes`."""
        cache = self._cache("_axis_groups")
        if axes not in cache:
            cache[axes] = _axis_groups(self.first_device, self.mesh_shape, axes)
        return cache[axes]

    def shard_degree(self, dim: int) -> int:
        return self._degrees.get(dim, 1)

    def local_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The largest local block (uneven splits round up); irregular: the largest box."""
        if self.boxes is not None:
            return tuple(max(b[d][1] - b[d][0] for b in self.boxes) for d in range(len(shape)))
        degrees = self._degrees
        return tuple(-(-n // degrees.get(d, 1)) for d, n in enumerate(shape))

    def local_num_elements(self, shape: tuple[int, ...]) -> int:
        """Elements of the largest local block, computed once per shape."""
        cache = self._cache("_local_elements")
        if shape not in cache:
            cache[shape] = math.prod(self.local_shape(shape))
        return cache[shape]

    def _cache(self, name: str) -> dict:
        """A dict kept on this (frozen) layout under `name`, made on first use (pickles drop it)."""
        found = self.__dict__.get(name)
        if found is None:
            found = {}
            object.__setattr__(self, name, found)
        return found

    def with_placement(self, axis: int, placement: Placement) -> "TensorLayout":
        placements = list(self.placements)
        placements[axis] = placement
        return replace(self, placements=tuple(placements))

    def device_box(self, device: int, shape: tuple[int, ...]) -> Box:
        if self.boxes is not None:
            return self.boxes[device - self.first_device]
        coords = self.coordinates(device)
        box = []
        for d, n in enumerate(shape):
            index, count = 0, 1
            for size, p, c in zip(self.mesh_shape, self.placements, coords):
                if p == Shard(d):
                    index, count = index * size + c, count * size
            box.append((index * n // count, (index + 1) * n // count))
        return tuple(box)

    def device_boxes(self, shape: tuple[int, ...]) -> np.ndarray:
        """Every device's box at once, [devices, dims, 2] int64 in device order (`device_box` of
        each), computed once per shape."""
        cache = self._cache("_boxes_by_shape")
        found = cache.get(shape)
        if found is None:
            found = cache[shape] = _frozen(self._device_boxes(shape))
        return found

    def _device_boxes(self, shape: tuple[int, ...]) -> np.ndarray:
        count = self.num_devices
        if self.boxes is not None:
            return np.asarray(self.boxes, dtype=np.int64).reshape(count, len(shape), 2)
        coords = self.all_coordinates().T
        boxes = np.empty((count, len(shape), 2), dtype=np.int64)
        for d, n in enumerate(shape):
            index, parts = np.zeros(count, dtype=np.int64), 1
            for size, p, c in zip(self.mesh_shape, self.placements, coords):
                if p == Shard(d):
                    index, parts = index * size + c, parts * size
            boxes[:, d, 0], boxes[:, d, 1] = index * n // parts, (index + 1) * n // parts
        return boxes

    def __str__(self) -> str:
        body = ",".join("?" if p is None else str(p) for p in self.placements) or "whole"
        mesh = "x".join(map(str, self.mesh_shape)) or "1"
        return f"({body})@{self.first_device}[{mesh}]"


def _frozen(array: np.ndarray) -> np.ndarray:
    """A cached array, read-only: every caller shares it."""
    array.flags.writeable = False
    return array


def output_layout(op_layout: OpLayout, gradient: bool = False) -> TensorLayout:
    config = op_layout.config
    placements = op_layout.output_gradient if gradient else op_layout.outputs
    return TensorLayout(config.first_device, config.mesh_shape, tuple(placements))


def input_layout(op_layout: OpLayout, index: int, gradient: bool = False,
                 boxes: tuple[Box, ...] | None = None) -> TensorLayout:
    config = op_layout.config
    placements = (op_layout.input_gradients if gradient else op_layout.inputs)[index]
    regular = all(p is not None for p in placements)
    return TensorLayout(config.first_device, config.mesh_shape, tuple(placements),
                        None if regular else boxes)


def whole_on(device: int) -> TensorLayout:
    return TensorLayout(device, (), ())


def _cuts(shape: tuple[int, ...]) -> set[int]:
    return {math.prod(shape[: k + 1]) for k in range(len(shape))}


def refine(a: TensorLayout, b: TensorLayout) -> tuple[TensorLayout, TensorLayout] | None:
    """Both layouts on their common refinement mesh, or None if the meshes have none."""
    if a.first_device != b.first_device or a.num_devices != b.num_devices:
        return None
    if a.mesh_shape == b.mesh_shape:
        return a, b
    cuts = sorted(_cuts(a.mesh_shape) | _cuts(b.mesh_shape))
    if any(hi % lo for lo, hi in zip(cuts, cuts[1:])):
        return None
    sizes = tuple(hi // lo for lo, hi in zip([1, *cuts], cuts))
    return _onto(a, cuts, sizes), _onto(b, cuts, sizes)


def _onto(layout: TensorLayout, cuts: list[int], sizes: tuple[int, ...]) -> TensorLayout:
    placements, axis, prefix = [], 0, layout.mesh_shape[0] if layout.mesh_shape else 1
    for cut in cuts:
        while cut > prefix:
            axis += 1
            prefix *= layout.mesh_shape[axis]
        placements.append(layout.placements[axis])
    return TensorLayout(layout.first_device, sizes, tuple(placements), layout.boxes)


def loader_layout(spec, num_devices: int) -> TensorLayout:
    """How the data loader hands a graph input (a TensorSpec) to the devices, the one rule the cost
    model, the simulator and the runtime share: its sample dim sharded over all of them when the
    batch divides evenly, else whole on every device (an uneven batch is not handed out in uneven
    shards); on one device, whole."""
    if num_devices == 1:
        return TensorLayout(0, (), ())
    d = spec.sample_dim
    even = d is not None and spec.shape[d] % num_devices == 0
    return TensorLayout(0, (num_devices,), (Shard(d) if even else REPLICATE,))


def _axis_groups(first_device: int, mesh_shape: tuple[int, ...], axes: tuple[int, ...]) -> "DeviceGroups":
    """The devices of a row-major mesh grouped by their coordinates off `axes`."""
    grid = first_device + np.arange(math.prod(mesh_shape)).reshape(mesh_shape)
    inside = [a for a in dict.fromkeys(axes) if a < len(mesh_shape)]
    outside = [a for a in range(len(mesh_shape)) if a not in inside]
    rows = np.sort(np.transpose(grid, outside + inside).reshape(-1, math.prod(mesh_shape[a] for a in inside)), axis=1)
    return DeviceGroups(map(tuple, rows.tolist()), _groups_origin(first_device, mesh_shape, set(inside)))


def _groups_origin(first_device: int, mesh_shape: tuple[int, ...], inside: set[int]) -> tuple:
    """What `_axis_groups` makes the same groups from: neighbouring axes both inside or both
    outside `axes` merged into one of their product, axes of size 1 dropped (on 16 devices, mesh
    (2, 4, 2) grouped on its last axis is (8, 2) grouped on its last)."""
    sizes: list[int] = []
    flags: list[bool] = []
    for axis, size in enumerate(mesh_shape):
        if size == 1:
            continue
        if flags and flags[-1] == (axis in inside):
            sizes[-1] *= size
        else:
            sizes.append(size)
            flags.append(axis in inside)
    return first_device, tuple(sizes), tuple(flags)


class DeviceGroups(tuple):
    """Device groups (a tuple of device tuples) that hash once: they key the prices, links and
    resources of every communication step, and on a large cluster they hold thousands of devices
    (a tuple hashes its items again on every lookup). Equal to, and hashed as, the plain tuple.
    Groups made alike (`origin`: the first device and the mesh with its axes merged as
    `_groups_origin` merges them) are equal without comparing their devices: every layout makes its
    own, and a price cached under one layout's groups is found under another's (on 16,384 devices,
    comparing them device by device took 26 s of planning gpt-70b)."""

    def __new__(cls, groups: Iterable[tuple[int, ...]], origin: tuple | None = None) -> "DeviceGroups":
        made = super().__new__(cls, groups)
        made._origin = origin
        return made

    def __hash__(self) -> int:
        found = self.__dict__.get("_hash")
        if found is None:
            found = self.__dict__["_hash"] = tuple.__hash__(self)
        return found

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if isinstance(other, DeviceGroups):
            if self._origin is not None and self._origin == other._origin:
                return True
            if hash(self) != hash(other):
                return False
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal
