"""Per-op kernel times on a GPU against the cost model's roofline, and the preset corrected from them.

    here:      PYTHONPATH=. python benchmarks/gpu_kernels.py cases -o benchmarks/data/gpu-kernel-cases.json
    on a GPU:  PYTHONPATH=. python benchmarks/gpu_kernels.py measure benchmarks/data/gpu-kernel-cases.json \
                   -o measured.json [--budget-s 300]
    here:      PYTHONPATH=. python benchmarks/gpu_kernels.py compare CASES MEASURED [--cluster h200-1x8] \
                   [--write docs/results/gpu-kernels.md]

1. `cases` takes the local ops a search prices (every op of a model under every configuration over
   N devices that the runtime runs, `SpaceOptions(runnable=True)`) for gpt-7b at 64 devices and the paper models (Transformer,
   WResNet, RNN) at 16, and samples up to `--per-kind` of each (model, op kind), evenly over
   log(FLOPs + bytes) so that small and large shares are both present. Each case is kept twice, in
   float32 (as captured) and in bfloat16 (`ir.with_floating_dtype`), with what its description
   says it does (`cost.opcost.described_work`: FLOPs, bytes, dtype, contraction); `compare`
   applies the op records' facts to them as the cost model does (`cost.opcost.work_of`).
2. `measure` runs each case with the runtime's own kernels (`runtime.localops.profile_impls`) on
   the GPU: forward and forward+backward back to back, timed with CUDA events (a stream's steady
   state: the kernels, or the host's dispatch where it is slower), backward = step - forward. It
   also measures the machine's reference figures (large matmul in each dtype, copy bandwidth, the
   time of an empty op) and writes all as it goes, so a run stopped at its budget keeps what it has.
3. `compare` prices each case with the preset's `ComputeModel` (the function the planner uses),
   prints predicted against measured per category and dtype, fits the efficiency curves and launch
   overhead that the measurements imply (`fit_device`), checks the fit on each model with curves
   fitted on the other models only, and writes the report.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from stratagem.cost.opcost import DescribedWork
from stratagem.files import atomic_write_json

MODELS = (("gpt-7b", 64), ("transformer", 16), ("wideresnet", 16), ("rnn", 16))
DTYPES = ("float32", "bfloat16")
CATEGORIES = {
    "matmul": {"linear", "matmul", "bmm", "addmm"},
    "attention": {"scaled_dot_product_attention"},
    "convolution": {"conv2d", "conv1d"},
    "normalization": {"layer_norm", "rms_norm", "batch_norm_apply", "batch_norm_stats", "batch_norm_running"},
    "data movement": {"transpose", "reshape", "slice", "cat", "select", "flatten", "embedding"},
    "loss": {"cross_entropy", "nll_loss"},
    "pooling": {"max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
                "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d"},
    "dropout (counter-based mask)": {"dropout"},
    "recurrent cell": {"gated_lstm_cell", "lstm_cell", "gru_cell"},
}


def category(kind: str) -> str:
    for name, kinds in CATEGORIES.items():
        if kind in kinds:
            return name
    return "elementwise"


# ---- cases (here) ----------------------------------------------------------------------------------

def sample_evenly(items: list, size, count: int) -> list:
    """`count` items spread evenly over the sorted sizes (all of them when there are fewer)."""
    ordered = sorted(items, key=size)
    if len(ordered) <= count:
        return ordered
    step = (len(ordered) - 1) / (count - 1)
    return [ordered[round(i * step)] for i in range(count)]


def case_row(model_name: str, devices: int, precision: str, work: DescribedWork) -> dict:
    r = work.request
    return {"model": model_name, "devices": devices, "precision": precision, "kind": r.kind,
            "category": category(r.kind),
            "input_shapes": [list(s) for s in r.input_shapes], "input_dtypes": list(r.input_dtypes),
            "attrs": r.attrs.to_json(), "requires_grad": list(r.requires_grad),
            "output_shape": list(r.output_shape), "flops": work.flops, "num_bytes": work.num_bytes,
            "dtype": work.dtype, "contraction": work.contraction}


def model_cases(model_name: str, devices: int, per_kind: int) -> list[dict]:
    from stratagem.cost import CostModel
    from stratagem.cost.opcost import described_work
    from stratagem.frontend import zoo
    from stratagem.ir import with_floating_dtype
    from stratagem.space import SpaceOptions
    from stratagem.space.enumerate import enumerate_configurations

    graph = zoo.build(model_name)
    models = {d: CostModel(graph if d == "float32" else with_floating_dtype(graph, d), "h100-8x8",
                           num_devices=devices) for d in DTYPES}
    first = models[DTYPES[0]]
    by_kind: dict[str, dict] = defaultdict(dict)
    for op in graph.ops:
        for config in enumerate_configurations(first.analyses[op.name], devices, SpaceOptions(runnable=True)):
            work = described_work(first, op.name, config)
            by_kind[op.kind].setdefault(work.request.key, (op.name, config, work))
    rows = []
    for kind, found in sorted(by_kind.items()):
        chosen = sample_evenly(list(found.values()), lambda x: math.log1p(x[2].flops + x[2].num_bytes), per_kind)
        for op_name, config, _ in chosen:
            rows += [case_row(model_name, devices, d, described_work(models[d], op_name, config)) for d in DTYPES]
    return rows


def write_cases(args: argparse.Namespace) -> None:
    rows = []
    for model_name, devices in MODELS:
        start = time.perf_counter()
        found = model_cases(model_name, devices, args.per_kind)
        rows += found
        print(f"{model_name}@{devices}: {len(found)} cases in {time.perf_counter() - start:.0f} s", flush=True)
    atomic_write_json(args.output, {"per_kind": args.per_kind, "cases": rows})
    print(f"wrote {len(rows)} cases to {args.output}")


# ---- measure (on the GPU) ------------------------------------------------------------------------

def _request(row: dict):
    from stratagem.cost import ProfileRequest
    from stratagem.ir import Attrs
    return ProfileRequest(row["kind"], tuple(tuple(s) for s in row["input_shapes"]), tuple(row["input_dtypes"]),
                          Attrs(row["attrs"]), tuple(row["requires_grad"]), tuple(row["output_shape"]))


def _stream_time_s(torch, fn, repeats: int) -> float:
    """Seconds per call of `fn` run `repeats` times back to back (CUDA events on a GPU)."""
    if not torch.cuda.is_available():
        start_s = time.perf_counter()
        for _ in range(repeats):
            fn()
        return (time.perf_counter() - start_s) / repeats
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / repeats


def case_functions(torch, row: dict, impls, device):
    """(forward, step, needs_grad) over fresh inputs on `device`: the runtime's kernel for the case,
    and forward then backward from a gradient made once (as a training step's backward receives it)."""
    from stratagem.runtime.profile_ops import _inputs, _outputs
    request = _request(row)
    inputs = _inputs(request, device)
    attrs, impl = dict(request.attrs), impls[request.kind]

    def forward():
        return impl(inputs, attrs, request.output_shape)

    gradients = [torch.ones_like(o) for o in _outputs(forward())]

    def step() -> None:
        outputs = _outputs(forward())
        if outputs:
            torch.autograd.backward(outputs, gradients)
        for t in inputs:
            t.grad = None

    return forward, step, any(request.requires_grad)


def timed_pair(timer, forward, step, needs_grad: bool, repeats: int) -> tuple[float, float]:
    forward_s = statistics.median(timer(forward, repeats) for _ in range(3))
    step_s = statistics.median(timer(step, repeats) for _ in range(3)) if needs_grad else forward_s
    return forward_s, max(step_s - forward_s, 0.0)


def measure_case(torch, row: dict, impls, device) -> dict:
    """Eager: back to back on the stream (the kernels, or the host's dispatch where that is slower)."""
    forward, step, needs_grad = case_functions(torch, row, impls, device)
    step()                                              # first call: kernel selection, allocator
    once_s = _stream_time_s(torch, step, 1)
    repeats = max(1, min(50, int(0.01 / max(once_s, 1e-6))))
    forward_s, backward_s = timed_pair(lambda fn, n: _stream_time_s(torch, fn, n), forward, step, needs_grad, repeats)
    return {"forward_time_s": forward_s, "backward_time_s": backward_s, "repeats": repeats}


def graph_time_s(torch, fn, repeats: int) -> float:
    """Seconds per call of `fn` captured `repeats` times in one CUDA graph and replayed: the GPU's
    time for the kernels alone, without the host's dispatch."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(repeats):
            fn()
    graph.replay()
    seconds = _stream_time_s(torch, graph.replay, 1) / repeats
    del graph
    return seconds


def measure_kernels(torch, row: dict, impls, device, repeats: int) -> dict:
    forward, step, needs_grad = case_functions(torch, row, impls, device)
    step()
    forward_s, backward_s = timed_pair(lambda fn, n: graph_time_s(torch, fn, n), forward, step, needs_grad, repeats)
    return {"kernel_forward_time_s": forward_s, "kernel_backward_time_s": backward_s}


def reference_figures(torch, device) -> dict:
    """What the machine reaches: matmul FLOP/s per dtype, copy bandwidth, an empty op's time."""
    figures = {"device_name": torch.cuda.get_device_name(device), "torch": torch.__version__,
               "multiprocessors": torch.cuda.get_device_properties(device).multi_processor_count,
               "memory_bytes": torch.cuda.get_device_properties(device).total_memory,
               "matmul_tf32": getattr(torch.backends.cuda.matmul, "allow_tf32", None),
               "cudnn_tf32": getattr(torch.backends.cudnn, "allow_tf32", None)}
    n = 8192
    for dtype in DTYPES:
        a = torch.randn(n, n, device=device, dtype=getattr(torch, dtype))
        a @ a
        figures[f"matmul_{dtype}_flops_per_s"] = 2 * n ** 3 / _stream_time_s(torch, lambda: a @ a, 5)
    x = torch.empty(2 ** 30 // 4, device=device)
    y = torch.empty_like(x)
    y.copy_(x)
    figures["copy_bytes_per_s"] = 2 * x.numel() * 4 / _stream_time_s(torch, lambda: y.copy_(x), 10)
    z = torch.zeros(1, device=device)
    figures["empty_op_s"] = _stream_time_s(torch, lambda: z.add_(1), 1000)
    figures["empty_kernel_in_graph_s"] = graph_time_s(torch, lambda: z.add_(1), 1000)
    w = torch.ones(1, device=device, requires_grad=True)
    one = torch.ones(1, device=device)

    def tiny_step():
        torch.autograd.backward([w * 1.0], [one])
        w.grad = None

    tiny_step()
    figures["backward_call_s"] = _stream_time_s(torch, tiny_step, 200) - _stream_time_s(torch, lambda: w * 1.0, 200)
    return figures


def measure(args: argparse.Namespace) -> None:
    import torch

    from stratagem.runtime.localops import profile_impls

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("measure --device cuda needs a GPU: torch.cuda.is_available() is False")
    rows = json.loads(Path(args.cases).read_text())["cases"][:args.only]
    deadline = time.perf_counter() + args.budget_s
    reference = reference_figures(torch, device) if device.type == "cuda" else {"device_name": "cpu"}
    result = {"reference": reference, "measured": [], "failed": [], "unmeasured": 0}
    print(json.dumps(result["reference"]), flush=True)
    impls = profile_impls()
    for i, row in enumerate(rows):
        if time.perf_counter() > deadline:
            result["unmeasured"] = len(rows) - i
            break
        try:
            result["measured"].append({"case": i, **measure_case(torch, row, impls, device)})
        except Exception as error:  # noqa: BLE001 - a kernel that fails is reported, the rest go on
            result["failed"].append({"case": i, "error": f"{type(error).__name__}: {error}"[:300]})
        _release(torch, device)
        if i % 25 == 0:
            atomic_write_json(args.output, result)
            print(f"{i}/{len(rows)} cases", flush=True)
    atomic_write_json(args.output, result)
    print(f"measured {len(result['measured'])}, failed {len(result['failed'])}, "
          f"not reached {result['unmeasured']} -> {args.output}", flush=True)
    if device.type == "cuda" and args.graphs:
        kernel_pass(torch, result, rows, impls, device, deadline + args.graph_budget_s, args.output)


def kernel_pass(torch, result: dict, rows: list[dict], impls, device, deadline: float, output: str) -> None:
    """The cases measured eagerly, again as CUDA graphs (kernel time alone); after the eager pass,
    so that a capture that fails cannot spoil it."""
    done = failed = 0
    for entry in result["measured"]:
        if time.perf_counter() > deadline:
            break
        try:
            entry.update(measure_kernels(torch, rows[entry["case"]], impls, device, entry["repeats"]))
            done += 1
        except Exception as error:  # noqa: BLE001 - an op that cannot be captured keeps its eager time
            entry["kernel_error"] = f"{type(error).__name__}: {error}"[:200]
            failed += 1
            torch.cuda.synchronize()
        _release(torch, device)
        if (done + failed) % 50 == 0:
            atomic_write_json(output, result)
    atomic_write_json(output, result)
    print(f"kernel times: {done} cases, {failed} could not be captured -> {output}", flush=True)


def _release(torch, device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


# ---- compare (here) ------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    cases = sub.add_parser("cases")
    cases.add_argument("-o", "--output", default="benchmarks/data/gpu-kernel-cases.json")
    cases.add_argument("--per-kind", type=int, default=10)
    run = sub.add_parser("measure")
    run.add_argument("cases")
    run.add_argument("-o", "--output", required=True)
    run.add_argument("--budget-s", type=float, default=300.0)
    run.add_argument("--device", default="cuda", help="torch device (cpu only to try the script)")
    run.add_argument("--only", type=int, default=None, help="the first N cases only")
    run.add_argument("--graphs", action=argparse.BooleanOptionalAction, default=True,
                     help="also time each case as a CUDA graph (kernel time alone)")
    run.add_argument("--graph-budget-s", type=float, default=200.0)
    compare = sub.add_parser("compare")
    compare.add_argument("cases")
    compare.add_argument("measured")
    compare.add_argument("--cluster", default="h200-1x8")
    compare.add_argument("--write", default=None)
    compare.add_argument("--launch-before-s", type=float, default=5e-6,
                         help="launch overhead of the device before the fit (the presets' datasheet figure)")
    args = parser.parse_args()
    if args.what == "cases":
        write_cases(args)
    elif args.what == "measure":
        measure(args)
    else:
        from benchmarks.gpu_kernel_fit import compare_report
        compare_report(args)


if __name__ == "__main__":
    main()
