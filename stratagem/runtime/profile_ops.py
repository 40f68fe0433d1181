"""Measure op times with torch (FlexFlow §5, A1: each distinct local op measured once).

For each `ProfileRequest` (kind, local input shapes and dtypes, attributes, which inputs need
gradients): build inputs on the device (floating inputs random, integer inputs zero so any index
input is in range), run `impl(inputs, attrs, out_shape)` `warmup` times, then time `repeats`
forward runs and `repeats` backward runs (autograd from a ones gradient made once, as a training
step's backward receives its gradient: neither the forward that feeds each backward nor the
gradient's allocation is timed), and keep the means (a step's time is the sum of its ops' times,
whose expectation is the sum of their means; where ranks share cores, time slicing skews a short
op's times to the right and the median is the run that was not preempted). The impl table
defaults to the runtime's kernels (`localops.profile_impls`: TORCH_OPS and what the adapters
run); tests and users may pass their own.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
import torch.distributed as dist

from stratagem import values
from stratagem.cost import ComputeTable, OpTiming, ProfileRequest, RuntimeOverhead, profile_requests
from stratagem.errors import ConfigError
from stratagem.ir import Graph
from stratagem.runtime.profile_overhead import runtime_overhead
from stratagem.runtime.timing import timed_s
from stratagem.space import SpaceOptions

Impl = Callable[[list[Any], Mapping[str, Any], tuple[int, ...]], Any]
MIN_REPEATS = 10


def default_impls() -> Mapping[str, Impl]:
    """The kernels the runtime runs on local shards (TORCH_OPS and the adapters' kernels)."""
    from stratagem.runtime.localops import profile_impls
    return profile_impls()


def device_kind(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def _inputs(request: ProfileRequest, device: torch.device) -> list[torch.Tensor]:
    tensors = []
    for shape, dtype_name, grad in zip(request.input_shapes, request.input_dtypes, request.requires_grad):
        dtype = getattr(torch, dtype_name)
        if dtype.is_floating_point:
            t = torch.randn(shape, dtype=dtype, device=device).requires_grad_(grad)
        else:
            t = torch.zeros(shape, dtype=dtype, device=device)
        tensors.append(t)
    return tensors


def _outputs(result: Any) -> list[torch.Tensor]:
    results = result if isinstance(result, (tuple, list)) else [result]
    return [r for r in results if isinstance(r, torch.Tensor) and r.requires_grad]


def measure(request: ProfileRequest, impl: Impl, repeats: int = MIN_REPEATS, warmup: int = 2,
            device: torch.device | str = "cpu") -> OpTiming:
    device = torch.device(device)
    inputs = _inputs(request, device)
    attrs = dict(request.attrs)
    forward = lambda: impl(inputs, attrs, request.output_shape)  # noqa: E731
    for _ in range(warmup):
        _backward(_outputs(forward()))
    forward_times = [timed_s(forward, device) for _ in range(repeats)]
    backward_times = []
    if any(request.requires_grad):
        gradients = [torch.ones_like(o) for o in _outputs(forward())]     # made once, not timed
        for _ in range(repeats):
            outputs = _outputs(forward())
            backward_times.append(timed_s(lambda: _backward(outputs, gradients), device))
            for t in inputs:
                t.grad = None
    backward = statistics.fmean(backward_times) if backward_times else 0.0
    return OpTiming(statistics.fmean(forward_times), backward, repeats)


def _backward(outputs: list[torch.Tensor], gradients: list[torch.Tensor] | None = None) -> None:
    """Backward from `gradients` (made by the caller, outside any timing), else from ones."""
    if outputs:
        torch.autograd.backward(outputs, gradients or [torch.ones_like(o) for o in outputs])


def profile(requests: Iterable[ProfileRequest], impls: Mapping[str, Impl] | None = None,
            repeats: int = MIN_REPEATS, warmup: int = 2, device: torch.device | str = "cpu",
            label: str | None = None, with_overhead: bool = True,
            before_each: Callable[[], Any] | None = None) -> ComputeTable:
    """Measure every request, and (`with_overhead`) the runtime's own time per op
    (runtime.profile_overhead); `label` names the device kind (default: the torch device's).
    `before_each` runs before each request (a barrier, so that ranks measure it side by side)."""
    values.integer(repeats, "repeats (for a stable mean)", minimum=MIN_REPEATS)
    values.integer(warmup, "warmup", minimum=0)
    impls = default_impls() if impls is None else impls
    requests = list(requests)
    missing = sorted({r.kind for r in requests} - set(impls))
    if missing:
        raise ConfigError("no torch implementation for some op kinds", got=str(missing),
                          hint="Add them to stratagem.frontend.torch_ops.TORCH_OPS, or pass impls=")
    entries = {}
    for r in requests:
        if before_each is not None:
            before_each()
        entries[r.key] = replace(measure(r, impls[r.kind], repeats, warmup, device), work=r.work)
    overhead = runtime_overhead(device, repeats=max(repeats, 30)) if with_overhead else None
    return ComputeTable(label or device_kind(torch.device(device)), entries, overhead)


def profile_graph(graph: Graph, num_devices: int, options: SpaceOptions = SpaceOptions(runnable=True),
                  **kwargs: Any) -> ComputeTable:
    """Every distinct local op of `graph` under the configurations a search over `num_devices`
    devices would consider (see cost.oplayouts.profile_requests); with `options.runnable`, as by
    default, only those the runtime runs (a local kernel cannot run the others' shards)."""
    values.integer(num_devices, "devices")
    values.integer(options.max_axes, "max_axes")
    return profile(profile_requests(graph, num_devices, options), **kwargs)


def slowest_rank(table: ComputeTable) -> ComputeTable | None:
    """Every rank's table (each measured beside the others, as ranks run a step) gathered to rank 0:
    per entry the slowest rank's times, since a step waits for it. None on the other ranks."""
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, table.to_json())
    if dist.get_rank() != 0:
        return None
    tables = [ComputeTable.from_json(t, f"rank {i}") for i, t in enumerate(gathered)]
    entries = {key: OpTiming(max(t.entries[key].forward_time_s for t in tables),
                             max(t.entries[key].backward_time_s for t in tables), timing.repeats, timing.work)
               for key, timing in tables[0].entries.items()}
    overheads = [t.runtime_overhead for t in tables if t.runtime_overhead is not None]
    return ComputeTable(table.device_kind, entries, _slowest(overheads) if overheads else None)


def _slowest(overheads: list[RuntimeOverhead]) -> RuntimeOverhead:
    """The slowest rank's, on an op of two inputs that both need gradients (a fit's parts are not
    compared one by one: noise moves time between per-op and per-input)."""
    return max(overheads, key=lambda o: o.forward_s(2) + o.backward_s(2))
