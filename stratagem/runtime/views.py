"""What one device computes of one op under a configuration (no torch).

A device at mesh coordinates c computes, of each split dim d, the chunk `Configuration.part(device, d)`
names: [i * X_d / k, (i + 1) * X_d / k) for part i of k (`Analysis.chunk`). `Analysis.share` gives
the regions it reads; an input it reads nothing of (a bias under a split reduction, on every worker
but the first) is given to the kernel as None. The local output shape is the share's output box.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stratagem.space import Configuration

Range = tuple[int, int]


@dataclass(frozen=True)
class WorkerView:
    assignment: Mapping[str, Range]         # split dim -> this device's [start, stop)
    out_box: tuple[Range, ...]              # the region of every output this device computes
    reads: tuple[bool, ...]                 # per input: whether this device reads any of it
    first_in_reduction: bool
    in_boxes: tuple[tuple[Range, ...] | None, ...] = ()   # per input: the region it reads

    @property
    def out_shape(self) -> tuple[int, ...]:
        return tuple(stop - start for start, stop in self.out_box)


def worker_view(analysis, config: Configuration, device: int) -> WorkerView:
    assignment: dict[str, Range] = {}
    first = True
    for dim in config.degrees:
        index, count = config.part(device, dim)
        assignment[dim] = analysis.chunk(dim, count, index)
        if analysis.dim(dim).is_reduction and index != 0:
            first = False
    share = analysis.share(assignment, first_in_reduction=first)
    return WorkerView(assignment, tuple(share.output_box), tuple(b is not None for b in share.input_boxes),
                      first, tuple(None if b is None else tuple(b) for b in share.input_boxes))


def local_extent(analysis, view: WorkerView, dim: str) -> int:
    start, stop = view.assignment.get(dim, (0, analysis.dim(dim).size))
    return stop - start
