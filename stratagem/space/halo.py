"""Halo exchange: how an input read in irregular regions reaches each device (FlexFlow §4's
attribute dims; Tofu §4's halo). A convolution or pooling window split along a position dim
reads, on each device, its chunk of the input's rows plus a few rows of its neighbours' (or,
strided, fewer rows than its chunk): regions no DTensor placement expresses.

    base      the regular layout the input is held in first: each irregular mesh axis a becomes
              S(d_a), d_a the one tensor dim along which the regions of devices that differ only
              in their coordinate on a differ; device j on a owns the even chunk [c_j, e_j) of d_a
    needed    device j's range [lo_j, hi_j) of d_a (its region's); it depends on j alone
    exchange  along a, device j receives from each coordinate i the overlap of [lo_j, hi_j) with
              [c_i, e_i) (its own overlap stays), and the pieces, in order of i, are its region;
              in backward each piece's gradient goes back to its owner, which adds it in place
    several   irregular axes exchange one after the other, each along its own dim; an exchange
              moves the slabs the earlier ones extended, so corners arrive with the second
    others    along every other dim a device holds its chunk of the base layout; its region there
              is the chunk or the chunk's leading rows (windows that never reach the last rows):
              the op reads from the chunk's start (runtime.localops' window adapter crops)

`halo_exchange(layout, boxes, shape)` gives the plan of exchanges, or a string saying why the
regions are not a halo of a regular layout (then nothing runs them). The runtime
(runtime.halo) carries it out; space.runnable refuses what it cannot.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from stratagem.space.placement import Shard
from stratagem.space.tensor_layout import Box, TensorLayout

Range = tuple[int, int]


@dataclass(frozen=True)
class HaloAxis:
    """One mesh axis's exchange along tensor dim `dim`: per coordinate on the axis, the range it
    owns and the range it needs."""

    axis: int
    dim: int
    owned: tuple[Range, ...]
    needed: tuple[Range, ...]

    def pieces(self, coordinate: int) -> tuple[tuple[int, int, int], ...]:
        """What `coordinate` needs, as (source coordinate, start, stop) in order along the dim."""
        lo, hi = self.needed[coordinate]
        found = []
        for source, (start, stop) in enumerate(self.owned):
            a, b = max(lo, start), min(hi, stop)
            if a < b:
                found.append((source, a, b))
        return tuple(found)

    def sends(self, coordinate: int) -> tuple[tuple[int, int, int], ...]:
        """What `coordinate` gives the others, as (destination coordinate, start, stop)."""
        return tuple((destination, a, b) for destination in range(len(self.needed)) if destination != coordinate
                     for source, a, b in self.pieces(destination) if source == coordinate)


@dataclass(frozen=True)
class Halo:
    base: TensorLayout
    axes: tuple[HaloAxis, ...]


def halo_exchange(lay: TensorLayout, boxes: tuple[Box, ...], shape: tuple[int, ...]) -> Halo | str:
    """The exchanges that turn `lay`'s regular base into its per-device `boxes`, or why none do."""
    dims: dict[int, int] = {}
    for axis, p in enumerate(lay.placements):
        if p is None:
            found = _varying_dims(lay, boxes, axis)
            if len(found) != 1:
                return (f"its regions differ along {len(found)} dims over mesh axis {axis}; a halo "
                        "exchange moves rows of one dim")
            dims[axis] = found[0]
    sharded = [p.dim for p in lay.placements if isinstance(p, Shard)] + list(dims.values())
    if len(sharded) != len(set(sharded)):
        return "a dim with a halo is split over several mesh axes; a halo exchange runs over one"
    base = replace(lay, placements=tuple(Shard(dims[a]) if p is None else p for a, p in enumerate(lay.placements)),
                   boxes=None)
    axes = []
    for axis, dim in dims.items():
        needed = _needed(lay, boxes, axis, dim)
        if needed is None:
            return f"a device's range of dim {dim} depends on more than its coordinate on mesh axis {axis}"
        if any(lo < 0 or hi > shape[dim] or lo >= hi for lo, hi in needed):
            return f"its regions of dim {dim} ({list(needed)}) are empty or leave the tensor"
        owned = tuple(_chunk(shape[dim], lay.mesh_shape[axis], j) for j in range(lay.mesh_shape[axis]))
        axes.append(HaloAxis(axis, dim, owned, needed))
    if not _others_within(lay, base, boxes, shape, set(dims.values())):
        return "its regions are not the leading rows of even chunks along a dim without a halo"
    return Halo(base, tuple(axes))


def _chunk(size: int, count: int, index: int) -> Range:
    return index * size // count, (index + 1) * size // count


def _varying_dims(lay: TensorLayout, boxes: tuple[Box, ...], axis: int) -> list[int]:
    """Dims along which two devices that differ only in their coordinate on `axis` read different
    ranges."""
    found = set()
    for offset, box in enumerate(boxes):
        coords = lay.coordinates(lay.first_device + offset)
        if coords[axis] == 0:
            continue
        other = boxes[_offset(lay, coords[:axis] + (0,) + coords[axis + 1:])]
        found.update(d for d, (a, b) in enumerate(zip(box, other)) if a != b)
    return sorted(found)


def _needed(lay: TensorLayout, boxes: tuple[Box, ...], axis: int, dim: int) -> tuple[Range, ...] | None:
    per_coordinate: dict[int, Range] = {}
    for offset, box in enumerate(boxes):
        j = lay.coordinates(lay.first_device + offset)[axis]
        if per_coordinate.setdefault(j, box[dim]) != box[dim]:
            return None
    return tuple(per_coordinate[j] for j in range(lay.mesh_shape[axis]))


def _others_within(lay: TensorLayout, base: TensorLayout, boxes: tuple[Box, ...], shape: tuple[int, ...],
                   halo_dims: set[int]) -> bool:
    """Along the other dims each region is its chunk, or the chunk's leading rows (a window whose
    last rows no window reaches): the device holds the chunk and reads from its start."""
    for offset, box in enumerate(boxes):
        chunk = base.device_box(lay.first_device + offset, shape)
        if any(box[d][0] != chunk[d][0] or box[d][1] > chunk[d][1] for d in range(len(shape)) if d not in halo_dims):
            return False
    return True


def _offset(lay: TensorLayout, coords: tuple[int, ...]) -> int:
    offset = 0
    for size, c in zip(lay.mesh_shape, coords):
        offset = offset * size + c
    return offset


__all__ = ["Halo", "HaloAxis", "halo_exchange"]
