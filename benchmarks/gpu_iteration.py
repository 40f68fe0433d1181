"""Whole training iterations on one GPU against the planner's prediction (issue 18, item 5).

    here:      PYTHONPATH=. python benchmarks/gpu_iteration.py plans --cluster h200-1x8 -o plans/ \
                   [--models gpt-125m ...] [--recompute]
    on a GPU:  PYTHONPATH=. python benchmarks/gpu_iteration.py measure plans/ -o measured.json [--per-op 3]
    here:      PYTHONPATH=. python benchmarks/gpu_iteration.py compare measured.json \
                   [--write docs/results/gpu-iteration-h200.md]
    on a GPU:  PYTHONPATH=. python benchmarks/gpu_iteration.py probes

`benchmarks/gpu_kernels.py` checks each op's kernel alone; this checks what a user meets: a whole
step (forward, backward, optimizer) run by stratagem's runtime on one GPU, against the iteration
time and peak memory the planner predicts for it with the device preset. On one device every plan
is the same (every op whole on device 0), so a prediction made later, with a changed cost model,
prices the very run that was measured.

1. `plans` plans each model of MODELS on one device of the preset (`stratagem plan MODEL
   --devices 1 --batch-size B`) and writes the plan files.
2. `measure` runs each plan on the GPU (`runtime.session.run_plans`, as `stratagem validate`:
   `--steps` steps, the first `--warmup` untimed, memory in the first steady step by MemTracker),
   optionally `--per-op` steps more timing each op (synchronised: slower than the steps), one launch
   per plan so that one failure leaves the others measured, and writes every report as it goes.
3. `compare` plans each measured model again with the cost model as it is now, on the cluster the
   plans were made for, and prints measured against predicted time and memory, with the error
   (measured - predicted) / measured, beside the prediction made when it was measured.
4. `probes` times on the GPU what the whole steps showed the cost model missing: bf16 and float32
   matmuls whose width is or is not a multiple of 8 (GPT-2's vocabulary, 50,257), and the
   runtime's counter-based dropout mask against torch's own dropout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.fidelity_cpu import spread_s
from stratagem.files import atomic_write_json

# (zoo model, batch size): a decoder in fp32 and one in bf16-mixed, the papers' Transformer, WResNet
# and RNN, BERT; batches that fit one 80 GB GPU with room to spare.
MODELS = (("gpt-125m", 8), ("gpt-1.3b", 8), ("transformer-s", 64), ("wresnet-50-4", 32),
          ("rnn-6-4k", 64), ("bert-base", 64))
# (zoo model, batch, first blocks recomputed): `plans --recompute` adds the same plans recomputing
# their first k blocks (search.selective), to check recomputation's time and memory on the GPU.
RECOMPUTED = (("gpt-125m", 8, (6, 12)), ("gpt-1.3b", 8, (12, 24)))


def plan_one(model: str, batch: int, cluster: str, recomputed: int = 0):
    """`stratagem plan MODEL --cluster CLUSTER --devices 1 --batch-size BATCH`, precision as the
    zoo trains the model; with its first `recomputed` blocks recomputed (search.selective)."""
    from stratagem.report import planning
    from stratagem.search.selective import with_first_recomputed
    request = planning.PlanRequest(model, cluster, 1, "mini_time", None, "ft", {}, batch, planning.zoo_precision(model))
    graph = planning.build_graph(model, batch)
    plan, _ = planning.plan_model(graph, request)
    if recomputed:
        plan = with_first_recomputed(planning.planning_context(graph, request, 1), plan, recomputed)
    return plan


def recomputed_of(plan_name: str) -> int:
    """The k of a plan file written as MODEL-recompute-K.json (0 for MODEL.json)."""
    head, _, k = Path(plan_name).stem.rpartition("-recompute-")
    return int(k) if head else 0


def write_plans(args: argparse.Namespace) -> None:
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    cases = [(model, batch, 0) for model, batch in MODELS]
    if args.recompute:
        cases += [(model, batch, k) for model, batch, ks in RECOMPUTED for k in ks]
    cases = [case for case in cases if not args.models or case[0] in args.models]
    for model, batch, k in cases:
        plan = plan_one(model, batch, args.cluster, k)
        plan.save(out / (f"{model}-recompute-{k}.json" if k else f"{model}.json"))
        print(f"{model} batch {batch}{f', first {k} blocks recomputed' if k else ''}: "
              f"{plan.iteration_time_s * 1e3:.1f} ms, {plan.peak_memory_bytes / 2**30:.2f} GiB predicted on {args.cluster}")


def measure(args: argparse.Namespace) -> None:
    import torch
    from stratagem.runtime.session import RunOptions, run_plans
    result = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
              "torch": torch.__version__, "steps": args.steps, "warmup": args.warmup, "plans": []}
    options = RunOptions(steps=args.steps, warmup=args.warmup, timeout_s=args.timeout_s, op_time_steps=args.per_op)
    for path in sorted(Path(args.plans).glob("*.json")):
        try:
            report, = run_plans([path], options)
        except Exception as error:       # noqa: BLE001 - one plan's failure is recorded, the rest run
            report = {"plan": str(path), "error": f"{type(error).__name__}: {error}"}
        result["plans"].append(report)
        atomic_write_json(args.output, result)
        print(path.name, report.get("iteration_time_s", report.get("error")), flush=True)


def compare(args: argparse.Namespace) -> None:
    measured = json.loads(Path(args.measured).read_text())
    rows = []
    for report in measured["plans"]:
        if "error" in report:
            rows.append(f"| {Path(report['plan']).stem} | failed: {report['error']} |")
            continue
        model, batch, k = report["model"], batch_of(report), recomputed_of(report["plan"])
        plan = plan_one(model, batch, report["cluster"], k)
        time_s, memory = report["iteration_time_s"], report["peak_memory_bytes_max"]
        spread = spread_s(report["step_times_s"][measured.get("warmup", 2):])
        rows.append(
            f"| {model}{f' (first {k} blocks recomputed)' if k else ''} | {batch} | {plan.precision} | {time_s * 1e3:.1f} ± {spread * 1e3:.1f} | "
            f"{report['predicted_iteration_time_s'] * 1e3:.1f} | {plan.iteration_time_s * 1e3:.1f} | "
            f"{error(time_s, plan.iteration_time_s):+.1%} | {memory / 2**30:.2f} | "
            f"{report['predicted_peak_memory_bytes'] / 2**30:.2f} | {plan.peak_memory_bytes / 2**30:.2f} | "
            f"{error(memory, plan.peak_memory_bytes):+.1%} |")
    text = "\n".join([
        f"Measured on {measured['device']} (torch {measured['torch']}), {measured['steps']} steps, the first "
        f"{measured.get('warmup', 2)} untimed; predicted on `{measured['plans'][0].get('cluster', '?')}`.",
        "", "| model | batch | precision | measured ms (± half IQR) | predicted then | predicted now | error | "
        "measured GiB | predicted then | predicted now | error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |", *rows])
    print(text)
    if args.write:
        Path(args.write).write_text(text + "\n")


def probes(args: argparse.Namespace) -> None:
    import torch
    import torch.nn.functional as F
    from stratagem.frontend.torch_impl.rng import uniform
    from stratagem.tdl.rng import dropout_counter
    print(torch.cuda.get_device_name(), torch.__version__)
    for dtype in (torch.bfloat16, torch.float32):
        for k in (768, 2048):
            for n in (50257, 50256, 50304, 32000):
                x = torch.randn(16384, k, device="cuda", dtype=dtype)
                w = torch.randn(n, k, device="cuda", dtype=dtype)
                seconds = cuda_time_s(torch, lambda: F.linear(x, w))
                print(f"linear {dtype} [16384 x {k}] x [{k} x {n}]: {seconds * 1e3:.3f} ms, "
                      f"{2 * 16384 * k * n / seconds / 1e12:.1f} TFLOP/s")
    for shape in ((64, 128, 768), (64, 12, 128, 128)):
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(*shape, device="cuda", dtype=dtype)

            def counter_based():
                positions = torch.arange(x.numel(), device="cuda", dtype=torch.int64).reshape(shape)
                keep = uniform(positions + dropout_counter(0, 0)) >= 0.1
                return torch.where(keep, x * (1 / 0.9), torch.zeros((), dtype=dtype, device="cuda"))
            print(f"dropout {list(shape)} {dtype}: counter-based {cuda_time_s(torch, counter_based) * 1e6:.1f} us, "
                  f"torch {cuda_time_s(torch, lambda: F.dropout(x, 0.1, True)) * 1e6:.1f} us")


def cuda_time_s(torch, fn, repeats: int = 20) -> float:
    """Seconds per call, CUDA events around `repeats` calls after 3 untimed."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats / 1e3


def batch_of(report: dict) -> int:
    return dict(MODELS)[report["model"]]


def error(measured: float, predicted: float) -> float:
    return (measured - predicted) / measured


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plans", help="plan each model on one device of the preset (here)")
    p.add_argument("--cluster", default="h200-1x8")
    p.add_argument("-o", "--output", required=True, help="folder for the plan files")
    p.add_argument("--models", nargs="*", help="only these of MODELS")
    p.add_argument("--recompute", action="store_true", help="also RECOMPUTED's plans with their first k blocks recomputed")
    p.set_defaults(handler=write_plans)
    p = sub.add_parser("measure", help="run each plan on the GPU")
    p.add_argument("plans", help="the folder `plans` wrote")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--per-op", type=int, default=0, help="steps more timing each op")
    p.add_argument("--timeout-s", type=float, default=300.0)
    p.set_defaults(handler=measure)
    p = sub.add_parser("compare", help="measured against predicted now (here)")
    p.add_argument("measured")
    p.add_argument("--write", help="write the table (Markdown) here")
    p.set_defaults(handler=compare)
    p = sub.add_parser("probes", help="matmul widths and the dropout mask, timed on the GPU")
    p.set_defaults(handler=probes)
    args = parser.parse_args()
    args.handler(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
