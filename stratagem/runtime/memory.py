"""Peak memory of one rank on CPU, where torch keeps no allocator statistics.

The figure is the largest total of live tensor storage bytes seen during one training step, as
torch.distributed._tools.MemTracker counts it: a TorchDispatchMode that records every storage an op
creates (DTensors counted by their local shards) and drops it when its storage is freed, plus the
parameters, gradients and optimizer states it is told about. It leaves out the allocator's caching
and fragmentation, Python objects, and gloo's buffers; it is the quantity the cost model predicts
(parameters, gradients, optimizer states, saved activations and the largest transients).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class PeakMemory:
    num_bytes: int = 0
    by_kind: dict | None = None


@contextmanager
def tracked(model, optimizer):
    """Measure the peak of live tensor bytes inside the block (one step)."""
    from torch.distributed._tools.mem_tracker import MemTracker
    tracker = MemTracker()
    tracker.track_external(model, optimizer)
    result = PeakMemory()
    with tracker:
        yield result
    peak = tracker.get_tracker_snapshot("peak")
    device = next(iter(peak.values()), {})
    result.num_bytes = int(device.get("Total", 0))
    result.by_kind = {str(getattr(k, "value", k)): int(v) for k, v in device.items()}
