"""Enumerate an operator's configurations (FlexFlow §4, TensorOpt §2.1).

For N devices: every device count n dividing N (or only N), every aligned block of n devices,
every sequence of mesh axes (at most `max_axes`) whose sizes multiply to n, each axis splitting a
splittable dim or replicating; kept when every dim's total degree is a valid split of the TDL
analysis (`Analysis.can_split`) and, unless `allow_irregular`, every input placement is a DTensor
placement (with `runnable`, only configurations the runtime executes: `space.runnable.refusal`).
Axis sequences are enumerated in canonical form (adjacent axes split different dims),
so each configuration appears once.

Counting check (Tofu §5.2): a 4-D tensor split evenly across 8 devices along any dims has 20
layouts, the number of degree vectors (d1..d4) with product 8; with the order of mesh axes
distinguished and at most 3 axes there are 4 + 2*4*3 + 4*3*3 = 64 configurations.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from stratagem.space.config import Configuration, Level, layout
from stratagem.space.runnable import refusal


@dataclass(frozen=True)
class SpaceOptions:
    max_axes: int = 3
    allow_fewer_devices: bool = True      # sub-blocks of the cluster (operator parallelism)
    allow_replicate: bool = True          # mesh axes that replicate computation
    allow_reduction: bool = True          # splitting reduction dims (outputs left P(sum))
    allow_irregular: bool = True          # splits no DTensor placement can express (halos)
    require_divisible: bool = True        # even splits only
    dims: frozenset[str] | None = None    # restrict to these dims (None: all splittable)
    device_counts: tuple[int, ...] | None = None   # restrict n (None: all divisors of N)
    runnable: bool = False                # only what stratagem.runtime executes (space.runnable)
    state_sharding: bool = False          # also each weight owner's sharded states (cost.weight_state)
    offload: bool = False                 # with state_sharding, also its "offloaded" state
    scatter_partial_sums: bool = False    # coarsened groups also reduce-scatter a partial sum into a
                                          # split follower (search.space.group_variants)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def ordered_factorizations(n: int, max_parts: int) -> Iterator[tuple[int, ...]]:
    """Ordered tuples of integers > 1 with product n, at most max_parts of them; () for n == 1."""
    if n == 1:
        yield ()
        return
    if max_parts == 0:
        return
    for first in divisors(n)[1:]:
        for rest in ordered_factorizations(n // first, max_parts - 1):
            yield (first, *rest)


def candidate_dims(analysis, options: SpaceOptions) -> list[str | None]:
    names: list[str | None] = []
    for d in analysis.dims:
        if not d.splittable or (d.is_reduction and not options.allow_reduction):
            continue
        if options.dims is not None and d.name not in options.dims:
            continue
        names.append(d.name)
    if options.allow_replicate:
        names.append(None)
    return names


_NO_LABEL = object()


def level_sequences(n: int, labels: list[str | None], max_axes: int) -> Iterator[tuple[Level, ...]]:
    """Canonical axis sequences: sizes multiply to n, adjacent axes carry different labels."""
    for sizes in ordered_factorizations(n, max_axes):
        yield from _label(sizes, labels, _NO_LABEL)


def _label(sizes: tuple[int, ...], labels: list[str | None], previous: object) -> Iterator[tuple[Level, ...]]:
    if not sizes:
        yield ()
        return
    for label in labels:
        if label == previous:
            continue
        for rest in _label(sizes[1:], labels, label):
            yield (Level(label, sizes[0]), *rest)


def is_valid(analysis, levels: tuple[Level, ...], options: SpaceOptions) -> bool:
    degrees: dict[str, int] = {}
    for level in levels:
        if level.dim is not None:
            degrees[level.dim] = degrees.get(level.dim, 1) * level.size
    for dim, k in degrees.items():
        size = analysis.dim(dim).size
        if options.require_divisible and size % k:
            return False
        if not analysis.can_split(dim, k):
            return False
    if not options.allow_irregular:
        return layout(analysis, Configuration(levels)).is_regular
    return True


def _runs(analysis, config: Configuration, num_devices: int, options: SpaceOptions) -> bool:
    return not options.runnable or refusal(analysis, config, num_devices) is None


def enumerate_configurations(analysis, num_devices: int, options: SpaceOptions = SpaceOptions()
                             ) -> tuple[Configuration, ...]:
    counts = options.device_counts or (divisors(num_devices) if options.allow_fewer_devices
                                       else [num_devices])
    labels = candidate_dims(analysis, options)
    found: list[Configuration] = []
    for n in counts:
        if num_devices % n:
            continue
        shapes = [levels for levels in level_sequences(n, labels, options.max_axes)
                  if is_valid(analysis, levels, options)]
        for first in range(0, num_devices, n):
            found.extend(c for c in (Configuration(levels, first) for levels in shapes)
                         if _runs(analysis, c, num_devices, options))
    return tuple(found)
