"""Predicted against measured kernel times (benchmarks/gpu_kernels.py), and the device fitted to them.

Prediction is the planner's own: each case's description (FLOPs, bytes, dtype, contraction) with
the op record's facts (`cost.opcost.work_of`: views move no bytes, TF32 for float32 convolutions,
attention on the matrix engine), priced by `ComputeModel(device, None).times`: a roofline with efficiency curves plus a launch overhead; backward = inputs needing
a gradient x forward. Two measurements of each case are compared:

    kernel   the case captured in a CUDA graph and replayed: the GPU's time alone
    eager    the case run back to back as the runtime runs it: the kernels, or the host's dispatch
             where that is slower (backward includes one autograd-engine call per case, which a
             training step pays once: `backward_call_s`, reported, not subtracted)

The fit keeps the roofline's form and the datasheet peaks and fits what the form leaves free:

    kernel floor       median kernel forward of the elementwise ops whose ideal work (roofline at
                       full efficiency) is under 1 us: what one kernel costs doing nothing
    launch_overhead_s  the same median over eager forwards: dispatch and launch per op
    matrix efficiency  per math dtype, eta = F / ((t_kernel - floor) * peak[dtype]) for matmuls
                       (convolutions run cuDNN's kernels, less efficient: reported, not fitted),
                       median per half-decade of F, made non-decreasing (pool adjacent violators)
    memory efficiency  eta = B / ((t_kernel - floor) * bandwidth) for memory-bound elementwise ops
                       (one kernel, one pass), per half-decade of B, at most 1 (a tensor that fits
                       in L2 moves faster than DRAM's bandwidth), not made monotone

Composite ops (normalizations, losses, attention with dropout written out) run several kernels
and passes; their error is reported by category, not fitted into the device. The fit is scored out
of sample: each model's cases priced by the device fitted on the other models only.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from benchmarks.gpu_kernels import _request, category
from stratagem.cluster import load
from stratagem.cluster.spec import CALCULON_MATRIX, CALCULON_MEMORY, CALCULON_VECTOR, DeviceSpec, EfficiencyCurve
from stratagem.cost.compute import ComputeModel
from stratagem.cost.opcost import DescribedWork, work_of
from stratagem.errors import TDLError
from stratagem.tdl.analysis import Analysis
from stratagem.tdl.library import LIBRARY
from stratagem.monotone import non_decreasing

ZERO_WORK_S = 1e-6
MIN_BIN_CASES = 3          # a half-decade with fewer cases is left to its neighbours
MATRIX_FIT = ("matmul",)
MEMORY_FIT = ("elementwise",)
TARGETS = ("kernel", "eager")


def joined_rows(cases_path: str, measured_path: str) -> tuple[list[dict], dict]:
    """Each measured case with its description priced as the cost model prices it (and its
    category as benchmarks/gpu_kernels.py names them now)."""
    cases = json.loads(Path(cases_path).read_text())["cases"]
    measured = json.loads(Path(measured_path).read_text())
    rows = []
    for m in measured["measured"]:
        row = {**cases[m["case"]], **m, "backward_call_s": measured["reference"].get("backward_call_s", 0.0)}
        work = work_of(described(row))
        rows.append({**row, "work": work, "num_bytes": work.num_bytes, "dtype": work.dtype, "matrix": work.matrix,
                     "category": category(row["kind"])})
    return rows, measured


def measured_s(row: dict, target: str) -> tuple[float, float]:
    """(forward, backward) seconds; eager backward without the one autograd-engine call per case
    (a training step pays it once), never below the kernels' own time."""
    if target == "kernel":
        return row["kernel_forward_time_s"], row["kernel_backward_time_s"]
    backward_s = max(row["backward_time_s"] - row["backward_call_s"], row["kernel_backward_time_s"])
    return row["forward_time_s"], backward_s


def described(row: dict) -> DescribedWork:
    """The case as its description says (benchmarks/gpu_kernels.py's row), with the facts its
    op's analysis gives of the case's shapes: the factors of its contraction, its random draws."""
    request = _request(row)
    try:
        analysis = Analysis(LIBRARY[row["kind"]].describe(*request.input_shapes, **dict(request.attrs)))
    except TDLError:     # a local share its adapter reads whole (the loss's target): the whole op's facts
        analysis = Analysis(LIBRARY[row["kind"]].describe_example())
        if analysis.random_draws():
            raise
    return DescribedWork(request, row["flops"], row["num_bytes"], row["dtype"], row["contraction"],
                         analysis.contraction_operands, analysis.random_draws())


def predicted(device: DeviceSpec, row: dict) -> tuple[float, float]:
    times = ComputeModel(device, None).times(row["work"])
    return times.forward_time_s, times.backward_time_s


def ideal_work_s(device: DeviceSpec, row: dict) -> float:
    peak = device.peak_flops_per_s(row["dtype"], row["matrix"]) or math.inf
    return max(row["flops"] / peak, row["num_bytes"] / device.memory_bandwidth_bytes_per_s)


def memory_bound(device: DeviceSpec, row: dict) -> bool:
    peak = device.peak_flops_per_s(row["dtype"], row["matrix"]) or math.inf
    return row["num_bytes"] / device.memory_bandwidth_bytes_per_s >= row["flops"] / peak


# ---- fit -------------------------------------------------------------------------------------------

def binned_curve(samples: list[tuple[float, float]], fallback: EfficiencyCurve, monotone: bool = True
                 ) -> EfficiencyCurve:
    """(size, efficiency) samples -> medians per half-decade of size (those with MIN_BIN_CASES),
    in (0, 1], non-decreasing if
    `monotone` (memory is not: tensors that fit in L2 move faster than DRAM's bandwidth)."""
    bins: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for size, eta in samples:
        if size > 0 and eta > 0:
            bins[math.floor(2 * math.log10(size))].append((size, eta))
    keys = sorted(k for k in bins if len(bins[k]) >= MIN_BIN_CASES)
    if len(keys) < 2:
        return fallback
    sizes = [10 ** statistics.median(math.log10(s) for s, _ in bins[k]) for k in keys]
    etas = [statistics.median(e for _, e in bins[k]) for k in keys]
    if monotone:
        etas = non_decreasing(etas, [len(bins[k]) for k in keys])
    return EfficiencyCurve(tuple((s, min(max(e, 1e-3), 1.0)) for s, e in zip(sizes, etas)))


def floors_s(device: DeviceSpec, rows: list[dict]) -> tuple[float, float]:
    """(kernel floor, eager floor): median forward of the elementwise ops (one kernel each) on next
    to no data."""
    tiny = [r for r in rows if r["category"] in MEMORY_FIT and r["num_bytes"] > 0
            and ideal_work_s(device, r) < ZERO_WORK_S]
    if not tiny:
        return device.launch_overhead_s, device.launch_overhead_s
    return (statistics.median(r["kernel_forward_time_s"] for r in tiny),
            statistics.median(r["forward_time_s"] for r in tiny))


def fit_device(device: DeviceSpec, rows: list[dict]) -> tuple[DeviceSpec, float]:
    """(the device with the eager launch overhead and the curves that `rows` imply: a matrix curve
    per dtype of the matmuls measured, one memory curve; the kernel floor)."""
    kernel_floor_s, launch_s = floors_s(device, rows)
    matrix: dict[str, list[tuple[float, float]]] = defaultdict(list)
    memory = []
    for r in rows:
        kernel_s = r["kernel_forward_time_s"] - kernel_floor_s
        if kernel_s <= 0:
            continue
        if r["matrix"] and r["category"] in MATRIX_FIT and r["flops"] > 0:
            eta = r["flops"] / (kernel_s * device.peak_flops_per_s(r["dtype"], True))
            matrix[r["dtype"]].append((r["flops"], eta))
        elif not r["matrix"] and r["category"] in MEMORY_FIT and memory_bound(device, r):
            memory.append((r["num_bytes"], r["num_bytes"] / (kernel_s * device.memory_bandwidth_bytes_per_s)))
    by_dtype = tuple((dtype, binned_curve(samples, device.matrix_efficiency))
                     for dtype, samples in sorted(matrix.items()))
    fitted = replace(device, launch_overhead_s=launch_s, matrix_efficiency_by_dtype=by_dtype,
                     memory_efficiency=binned_curve(memory, device.memory_efficiency, monotone=False))
    return fitted, kernel_floor_s


def for_target(fitted: tuple[DeviceSpec, float], target: str) -> DeviceSpec:
    device, kernel_floor_s = fitted
    return replace(device, launch_overhead_s=kernel_floor_s) if target == "kernel" else device


# ---- scores ----------------------------------------------------------------------------------------

def scores(device: DeviceSpec, rows: list[dict], target: str) -> dict:
    """Errors of predicted step time (forward + backward) against `target` over `rows`."""
    if not rows:
        return {"n": 0}
    ratios, predicted_total, measured_total = [], 0.0, 0.0
    for r in rows:
        f, b = predicted(device, r)
        m = sum(measured_s(r, target))
        ratios.append((f + b) / m)
        predicted_total += f + b
        measured_total += m
    errors = [abs(x - 1) for x in ratios]
    return {"n": len(rows), "median_ratio": statistics.median(ratios), "mean_abs_error": statistics.mean(errors),
            "within_25": sum(e <= 0.25 for e in errors) / len(errors),
            "weighted_ratio": predicted_total / measured_total}


def backward_ratio(rows: list[dict], target: str) -> float | None:
    """Measured backward / (forward x inputs needing a gradient): the model says 1."""
    found = []
    for r in rows:
        f, b = measured_s(r, target)
        if any(r["requires_grad"]) and f > 0:
            found.append(b / f / sum(r["requires_grad"]))
    return statistics.median(found) if found else None


def groups(rows: list[dict], key) -> dict:
    out: dict = defaultdict(list)
    for r in rows:
        out[key(r)].append(r)
    return dict(sorted(out.items()))


def out_of_sample(device: DeviceSpec, rows: list[dict], target: str) -> dict:
    """Per (model, precision): scored with the device fitted on the other models' cases only."""
    found = {}
    for model in sorted({r["model"] for r in rows}):
        fitted = for_target(fit_device(device, [r for r in rows if r["model"] != model]), target)
        for precision in sorted({r["precision"] for r in rows}):
            mine = [r for r in rows if r["model"] == model and r["precision"] == precision]
            found[(model, precision)] = scores(fitted, mine, target)
    return found


# ---- report ----------------------------------------------------------------------------------------

def _cells(s: dict) -> str:
    if not s.get("n"):
        return "| | | |"
    return f"{s['median_ratio']:.2f} | {100 * s['mean_abs_error']:.0f} % | {s['weighted_ratio']:.2f} |"


def comparison_table(title: str, rows: list[dict], key, pricings: list[tuple[str, object]]) -> list[str]:
    """One line per group: for each (label, (device, target)) the median ratio, mean error, and
    sum-over-sum ratio."""
    head = "| " + title + " | cases | " + " | ".join(f"{label}: median pred/meas | mean abs error | "
                                                    f"sum pred / sum meas" for label, _ in pricings) + " |"
    lines = [head, "| " + " | ".join(["---"] * (2 + 3 * len(pricings))) + " |"]
    for name, group in groups(rows, key).items():
        cells = [_cells(scores(device, group, target)) for (_, (device, target)) in pricings]
        label = ", ".join(name) if isinstance(name, tuple) else str(name)
        lines.append(f"| {label} | {len(group)} | " + " ".join(cells))
    return lines


def curve_yaml(curve: EfficiencyCurve) -> str:
    return "[" + ", ".join(f"[{s:.3g}, {e:.3f}]" for s, e in curve.points) + "]"


def device_yaml(device: DeviceSpec) -> str:
    lines = [f"launch_overhead_s: {device.launch_overhead_s:.3g}", "matrix_efficiency:",
             f"  default: {curve_yaml(device.matrix_efficiency)}"]
    lines += [f"  {dtype}: {curve_yaml(curve)}" for dtype, curve in device.matrix_efficiency_by_dtype]
    lines.append(f"memory_efficiency: {curve_yaml(device.memory_efficiency)}")
    return "\n".join(lines)


def before_fit(device: DeviceSpec, launch_s: float) -> DeviceSpec:
    """The device as a datasheet gives it: its peaks and bandwidth, Calculon's efficiency curves,
    `launch_s` per op (what the fit replaces)."""
    return replace(device, launch_overhead_s=launch_s, matrix_efficiency=CALCULON_MATRIX,
                   vector_efficiency=CALCULON_VECTOR, memory_efficiency=CALCULON_MEMORY,
                   matrix_efficiency_by_dtype=())


def compare_report(args) -> None:
    rows, measured = joined_rows(args.cases, args.measured)
    device = before_fit(load(args.cluster).devices[0].spec, args.launch_before_s)
    fitted = fit_device(device, rows)
    ref = measured["reference"]
    lines = [f"# Kernel times on {ref.get('device_name')} against the `{args.cluster}` device", "",
             f"Measured by `benchmarks/gpu_kernels.py` (torch {ref.get('torch')}): {len(rows)} cases, "
             f"{len(measured['failed'])} failed, {measured['unmeasured']} not reached. A case is one op's local "
             "share under one configuration; its step time is forward + backward. `kernel`: captured in a "
             "CUDA graph (GPU time alone); `eager`: back to back as the runtime runs it.", "",
             "## Reference figures", ""]
    lines += [f"- {k}: {v:.4g}" if isinstance(v, float) else f"- {k}: {v}" for k, v in ref.items()]
    for target in TARGETS:
        pricings = [("before", (device, target)), ("fitted", (for_target(fitted, target), target))]
        lines += ["", f"## {target} time: the device before the fit and fitted on all cases", ""]
        lines += comparison_table("category, precision", rows, lambda r: (r["category"], r["precision"]), pricings)
        lines += [""] + comparison_table("model, precision", rows, lambda r: (r["model"], r["precision"]), pricings)
        lines += ["", f"Out of sample ({target}): each model priced by the device fitted on the other models", "",
                  "| model, precision | cases | median pred/meas | mean abs error | sum pred / sum meas | within 25 % |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for (model, precision), s in out_of_sample(device, rows, target).items():
            lines.append(f"| {model}, {precision} | {s['n']} | {_cells(s)} {100 * s['within_25']:.0f} % |")
    lines += ["", "## Backward / (forward x inputs needing a gradient); the model says 1", "",
              "| category, precision | kernel | eager |", "| --- | --- | --- |"]
    for (cat, precision), group in groups(rows, lambda r: (r["category"], r["precision"])).items():
        ratios = [backward_ratio(group, t) for t in TARGETS]
        lines.append(f"| {cat}, {precision} | " + " | ".join("" if x is None else f"{x:.2f}" for x in ratios) + " |")
    lines += ["", "## Fitted device figures (a cluster file's `device:` entries)", "", "```yaml",
              device_yaml(fitted[0]), "```", "", f"Kernel floor (in a CUDA graph): {fitted[1]:.3g} s per op."]
    if measured["failed"]:
        lines += ["", "## Failed cases", ""] + [f"- case {f['case']}: {f['error']}" for f in measured["failed"][:20]]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        Path(args.write).write_text(text)
