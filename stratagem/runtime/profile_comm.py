"""Measure collective times per device partitioning and message size (TensorOpt §3.2).

Runs in every rank of a torchrun job (gloo on CPU, NCCL on GPU). The partitionings measured are
those a configuration's mesh axes produce (`partitionings`): for every mesh shape of the world
size (ordered factorizations, up to 3 axes) and every axis, the groups along that axis - for 4
ranks the whole group, pairs (0,1)(2,3) and pairs (0,2)(1,3). All groups of a partitioning run the
collective at the same time, so shared-link contention is in the measurement.

    burst = matmuls taking about after_compute_s on the slowest rank (the same count on every rank)
    for each partitioning, collective, size 2^i (min_exp <= i <= max_exp):
        run it warmup times
        aligned = mean over repeats of: world barrier; time the collective on this rank's group;
                                        all-reduce(MAX) of the times across ranks
        in_step = loop(burst; collective) - loop(burst), each `repeats` times between two world
                  barriers, per repeat, the slowest rank's
        keep max(aligned, in_step)          (aligned alone when after_compute_s is 0)
    dispatch, per way the runtime issues a collective (`dispatch_times`; the median of 5 rounds):
        sync = loop(a small Partial DTensor redistributed to Replicate) - loop(its all-reduce)
        move = (loop(a Shard(0) DTensor moved to Replicate and back under autograd)
                - loop(the same all-gather and reduce-scatter on plain tensors)) / 2
    rank 0 writes a CommTable (JSON)

Why in a step's rhythm: a training step reaches each collective from compute, and its ranks
arrive apart (each kernel's time jitters, a rank is descheduled, a waiting rank's thread must be
woken), where after a barrier they arrive together. On 2 gloo ranks of a 2-core CPU a 4 KiB
all-reduce took about 2 ms after a barrier and added 3-7 ms to a loop of 2-8 ms of matmuls; 4 MiB
5 ms against 8-9 ms. The mean, not the median, of the repeats: a step's time is the sum of its
parts' times, whose expectation is the sum of their means (time slicing makes the distribution of
a short call's time skewed: the median is the call that was not preempted).

The dispatch is the runtime's own time around each collective: it issues every one through DTensor
(runtime.move, runtime.execute's gradient sync), whose sharding propagation, redistribute plan and
wrapping run in Python on every call. On a 2-core CPU, eight measurements on 2 gloo ranks gave a
move's collective 0.8-1.6 ms more through DTensor under autograd and a gradient's sync 0-1.0 ms
more; five on 4 ranks 3.1-4.6 ms and 1.5-2.8 ms (a 1 KiB all-reduce alone: 3-4 ms). Ranks sharing
cores make it this noisy. `CommTable.time_s` adds it to every collective the cost model prices as
the runtime issues it.

Sizes are the full logical buffer (nccl-tests' S), rounded up so every rank's part is a whole
float32 element; the recorded size is the one actually moved. send_recv is measured on groups of
two (the first rank sends to the second).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

from stratagem import values
from stratagem.cluster.comm_table import CommTable, Groups, Series, normalize_groups
from stratagem.space.tensor_layout import TensorLayout
from stratagem.space import REPLICATE, ordered_factorizations
from stratagem.runtime.op_timing import settled
from stratagem.runtime.timing import synchronize, timed_s

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")
ITEMSIZE = 4
DISPATCH_ELEMENTS = 256          # the small gradient whose DTensor sync is timed against its all-reduce
DISPATCH_ROUNDS = 5              # rounds of (DTensor loop, plain loop): the median difference is kept
DISPATCH_CALLS = 60


@dataclass(frozen=True)
class CommProfileOptions:
    min_exp: int = 10
    max_exp: int = 24
    repeats: int = 10
    warmup: int = 2
    kinds: tuple[str, ...] = KINDS
    after_compute_s: float = 2e-3     # each collective also measured after this much compute (0: not)

    def __post_init__(self) -> None:
        values.integer(self.min_exp, "smallest size exponent (min_exp)", minimum=0)
        values.integer(self.max_exp, "largest size exponent (max_exp)", minimum=self.min_exp)
        values.integer(self.repeats, "repeats")
        values.integer(self.warmup, "warmup", minimum=0)
        values.non_negative(self.after_compute_s, "compute before each collective (after_compute_s)")
        for kind in self.kinds:
            values.one_of(kind, "collective", KINDS)


def partitionings(world_size: int, max_axes: int = 3) -> list[Groups]:
    found: dict[Groups, None] = {}
    for mesh in ordered_factorizations(world_size, max_axes):
        lay = TensorLayout(0, mesh, (REPLICATE,) * len(mesh))
        for axis in range(len(mesh)):
            found.setdefault(normalize_groups(lay.axis_groups((axis,))))
    return list(found)


def element_count(kind: str, num_bytes: int, p: int) -> int:
    """float32 elements of the full logical buffer, a multiple of p where the buffer is split."""
    elements = max(1, math.ceil(num_bytes / ITEMSIZE))
    return p * math.ceil(elements / p) if kind in ("all_gather", "reduce_scatter", "all_to_all") else elements


def _run(kind: str, group: Sequence[int], pg, elements: int, device: torch.device):
    p, rank = len(group), dist.get_rank()
    if kind == "all_reduce":
        buffer = torch.ones(elements, device=device)
        return lambda: dist.all_reduce(buffer, group=pg)
    if kind == "all_gather":
        out, part = torch.empty(elements, device=device), torch.ones(elements // p, device=device)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor   # torch < 2.12
        return lambda: gather(out, part, group=pg)
    if kind == "reduce_scatter":
        out, full = torch.empty(elements // p, device=device), torch.ones(elements, device=device)
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return lambda: scatter(out, full, group=pg)
    if kind == "all_to_all":
        out, send = torch.empty(elements, device=device), torch.ones(elements, device=device)
        return lambda: dist.all_to_all_single(out, send, group=pg)
    if kind == "broadcast":
        buffer = torch.ones(elements, device=device)
        return lambda: dist.broadcast(buffer, src=group[0], group=pg)
    buffer = torch.ones(elements, device=device)
    if rank == group[0]:
        return lambda: dist.send(buffer, dst=group[1], group=pg)
    return lambda: dist.recv(buffer, src=group[0], group=pg)


def _measure(op, options: CommProfileOptions, device: torch.device, burst=None) -> float:
    """Seconds of one collective: after a barrier, and with `burst`, as a step meets it (the
    module's docstring); the larger."""
    for _ in range(options.warmup):
        op()
    aligned = statistics.fmean(_aligned_s(op, device) for _ in range(options.repeats))
    if burst is None:
        return aligned
    in_step = _loop_s(lambda: (burst(), op()), options.repeats, device) - _loop_s(burst, options.repeats, device)
    return max(aligned, in_step)


def _aligned_s(op, device: torch.device) -> float:
    """One call started together after a world barrier: the slowest rank's seconds."""
    dist.barrier()
    return _slowest_s(timed_s(op, device))


def _loop_s(fn, repeats: int, device: torch.device) -> float:
    """Seconds per call of `repeats` calls back to back between two world barriers, the slowest rank's."""
    dist.barrier()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    synchronize(device)
    dist.barrier()
    return _slowest_s((time.perf_counter() - start) / repeats)


def _slowest_s(seconds: float) -> float:
    elapsed = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed)


def dispatch_times(options: CommProfileOptions, device: torch.device) -> dict[str, float]:
    """Seconds the runtime spends around one collective beyond the collective itself, per way it
    issues one (comm_table.ISSUED; the module's docstring), over every rank, each the median over
    `DISPATCH_ROUNDS` rounds of the difference of two loops of `DISPATCH_CALLS` calls, one after the
    other (each the slowest rank's; a round the machine slowed does not move the median), at least 0:
        "sync"  a small Partial DTensor redistributed to Replicate (a gradient synchronized)
                against the all-reduce of its local tensor
        "move"  a Shard(0) DTensor of a tensor needing a gradient moved to Replicate, read, and the
                gradient handed back (forward's all-gather, backward's reduce-scatter, both under
                autograd as runtime.move's) against the same all-gather and reduce-scatter on
                plain tensors with the same autograd around them; half the difference (two
                collectives)"""
    world = dist.get_world_size()
    mesh = DeviceMesh(device.type, list(range(world)))
    local = torch.zeros(DISPATCH_ELEMENTS, device=device)
    gradient = DTensor.from_local(local, mesh, [Partial()], run_check=False)
    weight = torch.zeros(DISPATCH_ELEMENTS, device=device, requires_grad=True)
    gathered = torch.empty(DISPATCH_ELEMENTS * world, device=device)
    part = torch.empty(DISPATCH_ELEMENTS, device=device)

    def sync_dtensor() -> None:
        settled(gradient.redistribute(mesh, [Replicate()]))

    def sync_plain() -> None:
        dist.all_reduce(local)

    def move_dtensor() -> None:
        shard = DTensor.from_local(weight * 1.0, mesh, [Shard(0)], run_check=False)
        whole = shard.redistribute(mesh, [Replicate()]).to_local(grad_placements=[Partial()])
        whole.sum().backward()

    def move_plain() -> None:
        mine = weight * 1.0
        dist.all_gather_into_tensor(gathered, mine.detach())
        mine.sum().backward()
        dist.reduce_scatter_tensor(part, gathered)
    pairs = {"sync": (sync_dtensor, sync_plain, 1), "move": (move_dtensor, move_plain, 2)}
    found = {}
    for issued, (via_dtensor, plain, collectives) in pairs.items():
        for _ in range(options.warmup + 1):
            via_dtensor()
            plain()
        rounds = [_loop_s(via_dtensor, DISPATCH_CALLS, device) - _loop_s(plain, DISPATCH_CALLS, device)
                  for _ in range(DISPATCH_ROUNDS)]
        found[issued] = max(0.0, statistics.median(rounds) / collectives)
    return found


def compute_burst(seconds: float, device: torch.device):
    """A callable of square matmuls that takes about `seconds` on the slowest rank, the same count
    of matmuls on every rank (a step's ranks run the same kernels); None for 0 seconds."""
    if seconds <= 0:
        return None
    a = torch.randn(256, 256, device=device)
    one_s = min(timed_s(lambda: a @ a, device) for _ in range(5))
    count = torch.tensor([max(1, round(seconds / max(one_s, 1e-9)))], dtype=torch.int64)
    dist.all_reduce(count, op=dist.ReduceOp.MIN)
    matmuls = int(count)

    def burst() -> None:
        for _ in range(matmuls):
            a @ a
    return burst


def profile_world(options: CommProfileOptions, device: torch.device) -> CommTable | None:
    """Call in every rank after init_process_group; rank 0 gets the table, the others None."""
    world, rank = dist.get_world_size(), dist.get_rank()
    groups_pg = {}
    parts = partitionings(world)
    for partitioning in parts:
        for group in partitioning:
            groups_pg.setdefault(group, dist.new_group(list(group)))
    series = {}
    burst = compute_burst(options.after_compute_s, device)
    for partitioning in parts:
        mine = next(g for g in partitioning if rank in g)
        p = len(mine)
        for kind in options.kinds:
            if p < 2 or (kind == "send_recv" and p != 2):
                continue
            sizes, times = [], []
            for exp in range(options.min_exp, options.max_exp + 1):
                elements = element_count(kind, 1 << exp, p)
                if sizes and elements * ITEMSIZE <= sizes[-1]:
                    continue
                op = _run(kind, mine, groups_pg[mine], elements, device)
                times.append(_measure(op, options, device, burst))
                sizes.append(float(elements * ITEMSIZE))
            series[(kind, partitioning)] = Series(tuple(sizes), tuple(times))
    dispatch = dispatch_times(options, device)
    if rank != 0:
        return None
    kind_name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    return CommTable(dist.get_backend(), world, kind_name, series, dispatch)
