"""Capture gpt-70b (LLaMA-2-70B shape, batch 8 x 4096 tokens) on the meta device: wall time and
peak resident memory of this process. Targets: under a minute, under 2 GB.

    PYTHONPATH=. python benchmarks/capture_70b.py
"""

from __future__ import annotations

import resource
import sys
import time
import warnings


def peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024   # Linux reports KiB


def main() -> int:
    from stratagem.frontend import zoo   # imports torch: counted in the RSS, not in the time
    baseline = peak_rss_bytes()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = zoo.build("gpt-70b")
    wall_s = time.perf_counter() - start
    print(f"gpt-70b: {graph.num_parameters:,} parameters ({graph.parameter_bytes / 2**30:.1f} GiB fp32), "
          f"{len(graph.ops)} ops, {len(graph.tensors)} tensors")
    print(f"capture wall time: {wall_s:.1f} s")
    print(f"peak RSS: {peak_rss_bytes() / 2**30:.2f} GiB (after importing torch: {baseline / 2**30:.2f} GiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
