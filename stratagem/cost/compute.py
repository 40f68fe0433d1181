"""Compute time of one device's share of an op: roofline with size-dependent efficiency.

    t_forward  = max( F / (eta_c(F) * a * peak[dtype, engine]),  (M + R) / (eta_m * memory_bw) ) + launch
    t_backward = sum over the inputs needing a gradient (below)

F = `Analysis.flops(local extents)` (`local_extents`: each split dim's largest chunk), M = bytes of
the device's input regions plus its output block (`local_bytes`). The engine is the matrix engine
for contractions (a top-level sum over a product of two inputs: matmul, convolution;
`is_contraction`), the vector units otherwise. eta_c and eta_m are the device's efficiency curves
(Calculon's, see cluster.spec.EfficiencyCurve): small kernels reach a small fraction of peak.
a is 1, or the device's `unaligned_gemm_factor` for a BLAS matrix product on tensor cores (its
record's `gemm`, math other than IEEE float32) whose rows are not all multiples of 4 bytes
(`rows_aligned`: an odd bf16 width, GPT-2's 50,257-word LM head). R is what the runtime moves
drawing the op's counter-based random numbers (`OpWork.mask_bytes`: tdl.rng.MASK_BYTES_PER_DRAW
per draw), in the forward only.

Backward: one kernel per input that needs a gradient. For an op on the matrix engine, an input
that is a factor of its contraction (`Analysis.contraction_operands`: x and W of y = x . W + b)
gets its gradient by one contraction with the forward's FLOPs and operand sizes (dX = dY . W^T,
dW = x^T . dY: the reference sheet's "backward ~ 2x forward for matmuls"); any other input (the
bias b, an LSTM cell's c) by one memory-bound pass that reads dY and writes its gradient (db sums
dY over the batch). For any other op each input gradient is one elementwise pass over tensors of
the forward's sizes, about one forward. Measured on an H200 (benchmarks/gpu_kernels.py), a biased
linear's backward is 1.5-2.1x its forward, not 3x. Op-specific factors come only from
measurement: a `ComputeTable` entry replaces both times (`ComputeModel.times`), and an op the
table lacks is estimated from the measured entries of its kind at the sizes around it
(cost.interpolate; the roofline alone where its kind was never measured). A table that
carries the runtime's own time per op (DTensor wrapping around each kernel, `runtime_overhead`: per op
and per input, or per input needing a gradient in backward) adds it to every op it prices, from its
entries or the roofline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stratagem.cluster.spec import DeviceSpec
from stratagem.cost.compute_table import ComputeTable, ProfileRequest
from stratagem.cost.interpolate import KindKey, Measured, kind_of, measured, measured_kinds
from stratagem.errors import ConfigError
from stratagem.ir import dtype_bytes
from stratagem.tdl.expr import Access, Apply


# cuBLAS's tensor-core kernels load rows in 16-, 8- or 4-byte vectors; a row of an odd number of
# bf16 elements allows none. Measured on an H200 (docs/results/gpu-iteration-h200.md): bf16 rows of
# 50,257, 625 and 125 elements ran at 0.12-0.28 of the curve; of 2,500, 1,250 and 500 (8-byte
# multiples) at 0.4-0.5 of it, as the curve fitted with them says.
ALIGNMENT_BYTES = 4
WITHOUT_TENSOR_CORES = ("float32", "float64")      # math dtypes whose GEMMs take no tensor cores


@dataclass(frozen=True)
class OpWork:
    """What prices one device's share of an op: the request a measured table is keyed by, its
    FLOPs, the bytes it reads and writes (none for a view: it aliases its input, no kernel runs),
    the precision of its math (`math_dtype`) and whether the matrix engine runs it (a
    contraction, or its record's `matrix_engine`)."""
    request: ProfileRequest
    flops: float
    num_bytes: float
    dtype: str
    matrix: bool
    operands: frozenset[int] = frozenset()    # inputs that are factors of its contraction
    gemm: bool = False                        # its record's `gemm`: one BLAS matrix product
    mask_bytes: float = 0.0                   # bytes its forward moves drawing random numbers


@dataclass(frozen=True)
class ComputeTimes:
    forward_time_s: float
    backward_time_s: float
    source: str           # "roofline", "table" or "interpolated"


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


def roofline_time_s(device: DeviceSpec, flops: float, num_bytes: float, dtype: str, matrix: bool,
                    slowdown: float = 1.0) -> float:
    """`slowdown`: a fraction of the compute efficiency the kernel reaches (an unaligned GEMM)."""
    peak = device.peak_flops_per_s(dtype, matrix)
    if peak is None:
        engine = "matrix" if matrix else "vector"
        raise ConfigError(f"device {device.kind!r} has no {engine} peak for dtype {dtype!r}",
                          hint=f"Add '{dtype}' or 'default' to {engine}_flops_per_s in the cluster file")
    efficiency = device.efficiency(dtype, matrix)
    compute_s = flops / (efficiency.at(flops) * slowdown * peak) if flops > 0 else 0.0
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
        self._kinds: dict | None = None                       # the table's entries with work, by kind
        self._measured: dict[KindKey, Measured] = {}          # priced on this device, as first asked

    def times(self, work: OpWork) -> ComputeTimes:
        request = work.request
        kernel = self._kernel_times(work)
        overhead = self.table.runtime_overhead if self.table is not None else None
        if overhead is None:
            return kernel
        return ComputeTimes(kernel.forward_time_s + overhead.forward_s(len(request.input_shapes)),
                            kernel.backward_time_s + overhead.backward_s(sum(request.requires_grad)), kernel.source)

    def _kernel_times(self, work: OpWork) -> ComputeTimes:
        if self.table is not None:
            measured = self.table.lookup(work.request)
            if measured is not None:
                return ComputeTimes(measured.forward_time_s, measured.backward_time_s, "table")
            estimated = self._interpolated(work)
            if estimated is not None:
                return estimated
        slowdown = 1.0
        if work.gemm and work.dtype not in WITHOUT_TENSOR_CORES and not rows_aligned(work.request, work.operands):
            slowdown = self.device.unaligned_gemm_factor
        kernel = roofline_time_s(self.device, work.flops, work.num_bytes, work.dtype, work.matrix, slowdown)
        forward = kernel
        if work.mask_bytes:
            forward = roofline_time_s(self.device, work.flops, work.num_bytes + work.mask_bytes, work.dtype,
                                      work.matrix, slowdown)
        backward = self._backward_s(work.request, kernel, work.dtype, work.operands if work.matrix else None)
        return ComputeTimes(forward, backward, "roofline")

    def _interpolated(self, work: OpWork) -> ComputeTimes | None:
        """From the measured entries of its kind around its size (cost.interpolate), if any."""
        if self._kinds is None:
            self._kinds = measured_kinds(self.table.entries)
        kind = kind_of(work.request.key)
        if kind not in self._kinds:
            return None
        if kind not in self._measured:
            self._measured[kind] = measured(self._kinds[kind], lambda flops, num_bytes: roofline_time_s(
                self.device, flops, num_bytes, work.dtype, work.matrix))
        found = self._measured[kind]
        if not found.roofline_s:
            return None
        forward, backward = found.estimate(roofline_time_s(self.device, work.flops, work.num_bytes + work.mask_bytes,
                                                           work.dtype, work.matrix))
        return ComputeTimes(forward, backward, "interpolated")

    def _backward_s(self, request: ProfileRequest, forward_s: float, dtype: str,
                    operands: frozenset[int] | None) -> float:
        """One kernel per input needing a gradient: a contraction like the forward for a factor
        of the op's contraction, else (on the matrix engine) a memory-bound pass reading dY and
        writing that gradient; one forward each when the op is no contraction."""
        if not operands:
            return sum(request.requires_grad) * forward_s
        output_bytes = _num_bytes(request.output_shape, request.input_dtypes[0])
        return sum(forward_s if i in operands else
                   roofline_time_s(self.device, 0.0, output_bytes + _num_bytes(shape, dt), dtype, False)
                   for i, (shape, dt, grad) in enumerate(zip(request.input_shapes, request.input_dtypes,
                                                             request.requires_grad)) if grad)


def rows_aligned(request: ProfileRequest, operands: frozenset[int]) -> bool:
    """Every row a BLAS matrix product reads or writes spans a multiple of ALIGNMENT_BYTES: the last
    dim of each factor of its contraction and of its result (GPT-2's 50,257-word LM head in bf16
    does not)."""
    rows = [(request.input_shapes[i], request.input_dtypes[i]) for i in sorted(operands)]
    rows.append((request.output_shape, request.input_dtypes[0]))
    return all(not shape or shape[-1] * dtype_bytes(dt) % ALIGNMENT_BYTES == 0 for shape, dt in rows)


def _num_bytes(shape: tuple[int, ...], dtype: str) -> float:
    return math.prod(shape) * dtype_bytes(dtype)
