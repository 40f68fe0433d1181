"""Compute time of one device's share of an op: roofline with size-dependent efficiency.

    t_forward  = max( F / (eta_c(F) * peak[dtype, engine]),  M / (eta_m(M) * memory_bw) ) + launch
    t_backward = g * t_forward

F = `Analysis.flops(local extents)` (`local_extents`: each split dim's largest chunk), M = bytes of
the device's input regions plus its output block (`local_bytes`). The engine is the matrix engine
for contractions (a top-level sum over a product of two inputs: matmul, convolution;
`is_contraction`), the vector units otherwise. eta_c and eta_m are the device's efficiency curves
(Calculon's, see cluster.spec.EfficiencyCurve): small kernels reach a small fraction of peak.

Backward: g = number of inputs that need a gradient (`gradient_inputs`). For a contraction
y = x . W each input gradient is one contraction with the forward's FLOPs and operand sizes
(dX = dY . W^T, dW = x^T . dY: the reference sheet's "backward ~ 2x forward for matmuls"); for an
elementwise op each input gradient is one elementwise pass over tensors of the forward's sizes.
So the backward is g kernels each costing about one forward. Op-specific factors come only from
measurement: a `ComputeTable` entry replaces both times (`ComputeModel.times`). A table that
carries the runtime's own time per op (DTensor wrapping around each kernel, `runtime_overhead`) adds
it to every op it prices, from its entries or the roofline.
"""

from __future__ import annotations

from dataclasses import dataclass

from stratagem.cluster.spec import DeviceSpec
from stratagem.cost.compute_table import ComputeTable, ProfileRequest
from stratagem.errors import ConfigError
from stratagem.tdl.expr import Access, Apply


@dataclass(frozen=True)
class ComputeTimes:
    forward_time_s: float
    backward_time_s: float
    source: str           # "roofline" or "table"


def is_contraction(analysis) -> bool:
    top = analysis.top
    return top is not None and top.reduce.reducer == "sum" and _product_of_two_inputs(top.reduce.body)


def _product_of_two_inputs(value) -> bool:
    if isinstance(value, Apply) and value.fn == "mul":
        reads = {a.tensor.position for a in value.args if isinstance(a, Access)}
        return len(reads) >= 2 or any(_product_of_two_inputs(a) for a in value.args)
    return False


def local_extents(analysis, degrees: dict[str, int]) -> dict[str, int]:
    return {d.name: -(-d.size // degrees[d.name]) for d in analysis.dims if d.name in degrees}


def roofline_time_s(device: DeviceSpec, flops: float, num_bytes: float, dtype: str, matrix: bool) -> float:
    peak = device.peak_flops_per_s(dtype, matrix)
    if peak is None:
        engine = "matrix" if matrix else "vector"
        raise ConfigError(f"device {device.kind!r} has no {engine} peak for dtype {dtype!r}",
                          hint=f"Add '{dtype}' or 'default' to {engine}_flops_per_s in the cluster file")
    efficiency = device.efficiency(dtype, matrix)
    compute_s = flops / (efficiency.at(flops) * peak) if flops > 0 else 0.0
    memory_s = num_bytes / (device.memory_efficiency.at(num_bytes) * device.memory_bandwidth_bytes_per_s)
    return max(compute_s, memory_s) + device.launch_overhead_s


class ComputeModel:
    """Forward and backward times per (request), from the table when it has the entry."""

    def __init__(self, device: DeviceSpec, table: ComputeTable | None):
        if table is not None and table.device_kind != device.kind:
            raise ConfigError("op time table measured on another kind of device",
                              expected=f"a table for {device.kind!r}", got=repr(table.device_kind),
                              hint="Profile on the cluster's devices, or label the table with "
                                   "`stratagem profile ops --device-kind`")
        self.device = device
        self.table = table

    def times(self, request: ProfileRequest, flops: float, num_bytes: float, dtype: str, matrix: bool
              ) -> ComputeTimes:
        kernel = self._kernel_times(request, flops, num_bytes, dtype, matrix)
        overhead = self.table.runtime_overhead if self.table is not None else None
        if overhead is None:
            return kernel
        backward = overhead.backward_time_s if any(request.requires_grad) else 0.0
        return ComputeTimes(kernel.forward_time_s + overhead.forward_time_s, kernel.backward_time_s + backward,
                            kernel.source)

    def _kernel_times(self, request: ProfileRequest, flops: float, num_bytes: float, dtype: str, matrix: bool
                      ) -> ComputeTimes:
        if self.table is not None:
            measured = self.table.lookup(request)
            if measured is not None:
                return ComputeTimes(measured.forward_time_s, measured.backward_time_s, "table")
        forward = roofline_time_s(self.device, flops, num_bytes, dtype, matrix)
        return ComputeTimes(forward, sum(request.requires_grad) * forward, "roofline")
