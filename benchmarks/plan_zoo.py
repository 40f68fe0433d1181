"""`stratagem plan` on every zoo model (issue 7): each model planned on a preset cluster through the
CLI, one subprocess per model, with its wall time, peak RSS and the plan's predicted figures.

    python benchmarks/plan_zoo.py [--cluster v100-2x8] [--timeout 900] [names...]

Prints one row per model: ok or the error's first line, wall seconds, the plan's devices,
simulated iteration time and peak memory per device, and whether it fits the memory cap.
Exit status 1 when any model fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def plan_one(name: str, cluster: str, timeout_s: float, directory: Path) -> dict:
    out = directory / f"{name.replace(':', '_')}.json"
    command = [sys.executable, "-m", "stratagem", "plan", name, "--cluster", cluster, "-o", str(out)]   # as a user runs it
    began = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"model": name, "status": f"timeout after {timeout_s:.0f} s", "wall_s": timeout_s}
    wall_s = time.perf_counter() - began
    if not out.exists():
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        return {"model": name, "status": "error: " + lines[-1][:120], "wall_s": wall_s}
    plan = json.loads(out.read_text())
    return {"model": name, "status": "ok" if done.returncode == 0 else "does not fit", "wall_s": wall_s,
            "devices": plan.get("num_devices"), "time_ms": plan.get("iteration_time_s", 0) * 1e3,
            "peak_gib": plan.get("peak_memory_bytes", 0) / 2**30}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--cluster", default="v100-2x8")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    from stratagem.frontend import zoo
    names = args.names or list(zoo.names())
    print(f"stratagem plan NAME --cluster {args.cluster}")
    print("| model | status | wall_s | devices | time_ms | peak_GiB |\n|---|---|---|---|---|---|")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            row = plan_one(name, args.cluster, args.timeout, Path(tmp))
            failed += row["status"] not in ("ok", "does not fit")
            cells = [row["model"], row["status"], f"{row['wall_s']:.1f}", str(row.get("devices", "")),
                     f"{row['time_ms']:.1f}" if "time_ms" in row else "",
                     f"{row['peak_gib']:.2f}" if "peak_gib" in row else ""]
            print("| " + " | ".join(cells) + " |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
