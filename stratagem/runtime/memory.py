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
    """Measure the peak of live tensor bytes inside the block (one step). A pipeline stage's module
    runs once per micro-batch, where MemTracker takes a root module's second call for a second
    step and refuses it: each call of `model` starts its per-module statistics afresh (a global
    pre-forward hook registered before the tracker's, so it runs first); the step's peak is the
    tracker's own, over every call."""
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.nn.modules.module import register_module_forward_pre_hook
    tracker = MemTracker()
    tracker.track_external(model, optimizer)
    result = PeakMemory()

    def restart(module, _inputs) -> None:
        if module is model:
            tracker.reset_mod_stats()

    handle = register_module_forward_pre_hook(restart)
    try:
        with tracker:
            yield result
    finally:
        handle.remove()
    peak = tracker.get_tracker_snapshot("peak")
    device = next(iter(peak.values()), {})
    result.num_bytes = int(device.get("Total", 0))
    result.by_kind = {str(getattr(k, "value", k)): int(v) for k, v in device.items()}
