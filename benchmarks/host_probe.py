"""What offloading to host memory costs on this machine (issue 20, offload): the device <-> host
link's bandwidth and latency, and the host CPU's optimizer step, the two figures a cluster file's
`host` section gives (cluster.spec.HostSpec) and the cost model prices the "offloaded" weight state
with.

    PYTHONPATH=. python benchmarks/host_probe.py [--threads 16,8,4,2] -o host.json

  link         pinned host memory to the device and back (`copy_` with non_blocking=True on its
               own CUDA stream, as FSDP2's CPUOffloadPolicy copies shards), each direction alone,
               both one after the other on that stream, and both at once on two streams (whether
               the link is full duplex: the simulator gives each direction its own resource), for
               1 MiB to 1 GiB; the time is the median of 5 after a warm-up, measured with CUDA
               events (wall time around a synchronize for the two streams). Without a GPU, it says so and measures nothing.
  optimizer    torch.optim.Adam (foreach, float32) stepping 64 Mi elements on the host CPU with
               `--threads` threads each: seconds per element, and the bytes a step moves per
               second when each element moves 16 bytes read and 12 written (param, grad, m, v
               read; param, m, v written: cost.memory.Optimizer.update_traffic_per_element),
               what the cost model divides by the host's memory bandwidth.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from stratagem.files import atomic_write_json

SIZES_BYTES = tuple(2 ** k for k in range(20, 31, 2))       # 1 MiB .. 1 GiB
ADAM_ELEMENTS = 64 * 2 ** 20
ADAM_BYTES_PER_ELEMENT = 28                                  # 4 tensors read, 3 written, float32


def link_figures() -> dict:
    import torch
    if not torch.cuda.is_available():
        return {"skipped": "no CUDA device"}
    stream = torch.cuda.Stream()
    rows = []
    for size in SIZES_BYTES:
        host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        device = torch.empty(size, dtype=torch.uint8, device="cuda")
        host_out = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        device_in = torch.empty(size, dtype=torch.uint8, device="cuda")
        row = {"num_bytes": size}
        for name, copies in (("host_to_device_s", [(device, host)]), ("device_to_host_s", [(host_out, device_in)]),
                             ("both_s", [(device, host), (host_out, device_in)])):
            times = []
            for _ in range(6):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                with torch.cuda.stream(stream):
                    start.record(stream)
                    for dst, src in copies:
                        dst.copy_(src, non_blocking=True)
                    end.record(stream)
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            row[name] = statistics.median(times[1:])
        row["duplex_s"] = _duplex_s(torch, (device, host), (host_out, device_in))
        rows.append(row)
        del host, device, host_out, device_in
    return {"device": torch.cuda.get_device_name(), "rows": rows}


def _duplex_s(torch, into, out) -> float:
    """Both copies at once, each on its own stream: the median wall time of 5 after a warm-up."""
    streams = (torch.cuda.Stream(), torch.cuda.Stream())
    times = []
    for _ in range(6):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for stream, (dst, src) in zip(streams, (into, out)):
            with torch.cuda.stream(stream):
                dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def optimizer_figures(threads: list[int]) -> list[dict]:
    import torch
    found = []
    param = torch.nn.Parameter(torch.randn(ADAM_ELEMENTS))
    param.grad = torch.randn(ADAM_ELEMENTS)
    for n in threads:
        torch.set_num_threads(n)
        optimizer = torch.optim.Adam([param], lr=1e-4, foreach=True)
        optimizer.step()                                      # makes the state
        times = []
        for _ in range(3):
            start = time.perf_counter()
            optimizer.step()
            times.append(time.perf_counter() - start)
        step_s = min(times)
        found.append({"threads": n, "elements": ADAM_ELEMENTS, "step_s": step_s,
                      "seconds_per_element": step_s / ADAM_ELEMENTS,
                      "bytes_per_s": ADAM_ELEMENTS * ADAM_BYTES_PER_ELEMENT / step_s})
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="16,8,4,2", help="host threads per optimizer step, comma-separated")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",") if t]
    result = {"link": link_figures(), "optimizer": optimizer_figures(threads)}
    atomic_write_json(args.output, result)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
