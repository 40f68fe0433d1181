"""Representative ranks: one simulated device per class of devices that a strategy treats alike
(issue 19: simulating a plan on thousands of GPUs without a task per op per device).

Cut [0, N) at the first and last device of every op's configuration; the pieces are the classes
(all ops on all devices: one class). Two devices d, d' of one class run the same ops, so the task
graph is the same seen from either: each compute task X(o, d) has a twin X(o, d') with the same
duration, its predecessors on d are the twins of those on d', and the shared tasks (gathers,
syncs, re-scheduling steps: one task for all devices) wait for all twins alike. The engine (sim.engine)
orders a resource's tasks by (ready, key), and the keys of tasks on one device differ before their
device field, so by induction over the engine's order

    start(X(o, d)) = start(X(o, d'))   and every shared task starts as it would,

provided a shared task holds a class whole or not at all (where a rank waits for its collectives,
`ClusterSpec.overlap_compute` False, a step holds its groups' devices; a step that holds part of a
class breaks the symmetry, and the simulation is built over every device instead: `PartClass`).
Buffers have one size per op, so each device of a class peaks alike. One device per class
therefore gives every device's times, peak and busy time exactly (the same floating-point sums in
the same order); the simulator numbers the classes 0..K-1 as its "devices" (op o's are a range,
the classes inside o's devices), and `expand` gives each device its class's figure.

Every device its own class (`every_device`) is the simulator over all devices, which delta
simulation needs: an edit can move the cuts.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from stratagem.errors import StratagemError


class PartClass(StratagemError):
    """A communication step holds part of a class of devices: one rank cannot stand for the class."""


@dataclass(frozen=True)
class DeviceClasses:
    """Devices [0, num_devices) cut at `cuts` (0 < ... < num_devices): class i is
    [bounds[i], bounds[i + 1])."""
    num_devices: int
    bounds: tuple[int, ...]
    _ranges: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def count(self) -> int:
        return len(self.bounds) - 1

    @cached_property
    def every(self) -> bool:
        """Each device its own class (class numbers are device numbers)."""
        return self.count == self.num_devices

    @cached_property
    def sizes(self) -> np.ndarray:
        return np.diff(np.asarray(self.bounds, dtype=np.int64))

    def of_range(self, devices: range) -> range:
        """The classes inside `devices` (a range of whole classes), as a range of class numbers."""
        if self.every:
            return devices
        found = self._ranges.get((devices.start, devices.stop))
        if found is None:
            lo, hi = bisect.bisect_left(self.bounds, devices.start), bisect.bisect_left(self.bounds, devices.stop)
            if self.bounds[lo] != devices.start or self.bounds[hi] != devices.stop:
                raise PartClass("devices cut inside a class", expected=f"whole classes of {self.bounds}",
                                got=str(devices))
            found = self._ranges[(devices.start, devices.stop)] = range(lo, hi)
        return found

    def of_devices(self, devices: Iterable[int]) -> list[int]:
        """The classes of `devices` (a set of whole classes), sorted; PartClass otherwise."""
        if self.every:
            return sorted(set(devices))
        chosen = sorted(set(devices))
        per_class = np.bincount(np.searchsorted(self.bounds, chosen, side="right") - 1, minlength=self.count) \
            if chosen else np.zeros(self.count, dtype=np.int64)
        held = np.flatnonzero(per_class)
        if (per_class[held] != self.sizes[held]).any():
            raise PartClass("a communication step holds part of a class of devices",
                            expected="whole classes", got=f"{len(chosen)} devices")
        return [int(c) for c in held]

    def expand(self, values: np.ndarray) -> np.ndarray:
        """Per device, its class's value (values per class, or per device when every device is one)."""
        values = np.asarray(values)
        return values if self.every else np.repeat(values[:self.count], self.sizes)


def every_device(num_devices: int) -> DeviceClasses:
    return DeviceClasses(num_devices, tuple(range(num_devices + 1)))


def classes_of(ranges: Iterable[range], num_devices: int) -> DeviceClasses:
    """The coarsest classes that every range of `ranges` is made of (with [0, num_devices) cut
    at their ends)."""
    cuts = {0, num_devices}
    for devices in ranges:
        cuts.update((devices.start, devices.stop))
    return DeviceClasses(num_devices, tuple(sorted(c for c in cuts if 0 <= c <= num_devices)))
