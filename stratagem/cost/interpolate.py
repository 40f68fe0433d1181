"""An op the measured table never ran, estimated from the measured ops of its kind around it.

Ops of one kind (same kind, input dtypes, attributes, inputs needing gradients and ranks of their
inputs: `kind_of`) run at an efficiency that changes smoothly with their size. A measured entry n
whose work was recorded (compute_table.Work) gives the ratio of its measured times to the
roofline's forward time R(n) on the device's figures (cost.compute.roofline_time_s):

    s_f(n) = forward_s(n) / R(n),        s_b(n) = backward_s(n) / R(n)

For an op q of that kind that the table lacks, between the measured entries a and b of its kind
nearest to it in R (R(a) <= R(q) <= R(b)), the ratios are interpolated linearly in log R (sizes
span decades; efficiency curves are drawn so, Calculon's and FlexFlow's §5 measured tables alike):

    w = (log R(q) - log R(a)) / (log R(b) - log R(a)),     s(q) = s(a) + w * (s(b) - s(a))

and beyond the measured sizes the nearest entry's ratio is kept. Then forward_s(q) = s_f(q) R(q)
and backward_s(q) = s_b(q) R(q): a kind's backward is priced by what it measured against its own
forward's roofline, not by the roofline's guess at backward. At a measured size the estimate is
the measurement. R(q) and R(n) are priced alike (the same dtype and engine, no unaligned-GEMM
slowdown): only their ratio matters.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from stratagem.cost.compute_table import Key, OpTiming

KindKey = tuple


@dataclass(frozen=True)
class Measured:
    """A kind's measured entries by increasing roofline time: R(n), s_f(n), s_b(n)."""
    roofline_s: tuple[float, ...]
    forward_ratio: tuple[float, ...]
    backward_ratio: tuple[float, ...]

    def estimate(self, roofline_s: float) -> tuple[float, float]:
        """(forward_s, backward_s) of an op of this kind whose roofline time is `roofline_s`."""
        i = bisect.bisect_left(self.roofline_s, roofline_s)
        if i == 0 or i == len(self.roofline_s):
            j = min(i, len(self.roofline_s) - 1)
            return self.forward_ratio[j] * roofline_s, self.backward_ratio[j] * roofline_s
        low, high = self.roofline_s[i - 1], self.roofline_s[i]
        w = math.log(roofline_s / low) / math.log(high / low)
        forward = self.forward_ratio[i - 1] + w * (self.forward_ratio[i] - self.forward_ratio[i - 1])
        backward = self.backward_ratio[i - 1] + w * (self.backward_ratio[i] - self.backward_ratio[i - 1])
        return forward * roofline_s, backward * roofline_s


def kind_of(key: Key) -> KindKey:
    """What an entry must share with an op to stand for it at another size."""
    kind, shapes, dtypes, attrs, grads = key
    return kind, dtypes, attrs, grads, tuple(len(s) for s in shapes)


def measured_kinds(entries: Mapping[Key, OpTiming]) -> dict[KindKey, list[tuple[Key, OpTiming]]]:
    """The entries whose work was recorded, by kind."""
    kinds: dict[KindKey, list[tuple[Key, OpTiming]]] = {}
    for key, timing in entries.items():
        if timing.work is not None:
            kinds.setdefault(kind_of(key), []).append((key, timing))
    return kinds


def measured(members: list[tuple[Key, OpTiming]], roofline: Callable[[float, float], float]) -> Measured:
    """A kind's entries priced by `roofline(flops, num_bytes)`; of entries at one roofline time,
    the first."""
    rows: dict[float, tuple[float, float]] = {}
    for _, timing in members:
        r = roofline(timing.work.flops, timing.work.num_bytes)
        if r > 0:
            rows.setdefault(r, (timing.forward_time_s / r, timing.backward_time_s / r))
    ordered = sorted(rows.items())
    return Measured(tuple(r for r, _ in ordered), tuple(f for _, (f, _) in ordered),
                    tuple(b for _, (_, b) in ordered))
