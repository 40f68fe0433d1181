"""Launch the same-training job again and again, and count the launches that fail (the runtime's
robustness under load; tests/runtime/test_same_training launches it once per world size).

    PYTHONPATH=$PWD python benchmarks/launch_stress.py [--devices 2] [--launches 20]

Each launch runs every plan of test_same_training.CASES[devices] for 3 steps on gloo ranks through
torchrun, with the single-process check. Prints one line per launch (ok, a mismatch, or the
failure summary, which quotes a rank's stderr when it died of a signal) and the count at the end.
Exit status 1 when any launch failed. Run it beside other work to load the cores.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from stratagem.runtime.errors import RunFailed
from stratagem.runtime.session import RunOptions, run_plans
from stratagem.search.registry import ALGORITHMS
from tests.runtime.plans import saved
from tests.runtime.test_same_training import CASES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2, choices=sorted(CASES))
    parser.add_argument("--launches", type=int, default=20)
    args = parser.parse_args(argv)
    directory = Path(tempfile.mkdtemp(prefix="launch-stress-"))
    cases = [c for c in CASES[args.devices] if c[1] in ALGORITHMS]
    paths = [saved(directory, model, algorithm, args.devices) for model, algorithm in cases]
    failed = 0
    for i in range(args.launches):
        out = directory / f"launch{i}"
        began = time.perf_counter()
        try:
            reports = run_plans(paths, RunOptions(steps=3, check=True, timeout_s=120, out_dir=str(out)))
        except RunFailed as error:
            failed += 1
            print(f"{i} FAILED after {time.perf_counter() - began:.0f} s: {error}", flush=True)
            continue
        wrong = [f"{m}/{a}" for (m, a), r in zip(cases, reports) if not r["check"]["same_training"]]
        failed += bool(wrong)
        print(f"{i} {'NOT the same training: ' + ', '.join(wrong) if wrong else 'ok'} "
              f"({time.perf_counter() - began:.0f} s, {len(cases)} plans)", flush=True)
        shutil.rmtree(out)
    print(f"{failed} of {args.launches} launches failed ({args.devices} ranks)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
