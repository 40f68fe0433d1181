"""Re-scheduling picks the collectives PyTorch DTensor picks (the oracle; this test imports torch).

DTensor's planner runs on a fake process group of 8 ranks (no data, no devices); its transform
steps are mapped to collective kinds as DTensor's own `_comm_type_key` does, and for cases without
all-to-all (the CPU backend falls back to all-gather there) the collectives DTensor actually issues
are counted with CommDebugMode. We compare the multisets of collective kinds.
"""

from __future__ import annotations

from collections import Counter

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard  # noqa: E402
from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta  # noqa: E402
from torch.distributed.tensor._redistribute import _gen_transform_infos_non_cached  # noqa: E402
from torch.distributed.tensor.debug import CommDebugMode  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402

from stratagem.cluster import load  # noqa: E402
from stratagem.space.tensor_layout import TensorLayout  # noqa: E402
from stratagem.cost.reschedule import Rescheduler  # noqa: E402
from stratagem.space import REPLICATE, Partial as SgPartial, Shard as SgShard  # noqa: E402

pytestmark = pytest.mark.numerics     # run under every kernel path by scripts/numerics_variants.sh

SHAPE = (64, 128)
S0, S1, R, P = Shard(0), Shard(1), Replicate(), Partial()
CASES = [
    ((8,), (S0,), (R,)), ((8,), (P,), (R,)), ((8,), (P,), (S0,)), ((8,), (R,), (S1,)),
    ((8,), (S0,), (S1,)), ((2, 4), (S0, S1), (R, R)), ((2, 4), (P, P), (R, R)),
    ((2, 4), (P, S0), (R, R)), ((2, 4), (S0, R), (R, S0)), ((2, 4), (S0, S1), (S1, S0)),
    ((2, 4), (P, R), (S0, R)), ((2, 4), (S0, S0), (R, R)), ((2, 4), (S0, S0), (S0, R)),
    ((2, 4), (R, S0), (S0, R)), ((2, 4), (P, S1), (S0, S1)), ((2, 4), (S1, R), (S0, R)),
    ((2, 4), (R, S1), (R, S0)), ((2, 4), (S0, R), (S0, S1)), ((2, 4), (P, R), (R, S1)),
    ((4, 2), (S1, P), (S1, S0)), ((2, 2, 2), (S0, S1, P), (R, S1, R)),
]


@pytest.fixture(scope="module")
def fake_world():
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    yield
    dist.destroy_process_group()


def ours(mesh, src, dst) -> Counter:
    cluster = load("h100-1x8")
    rescheduler = Rescheduler(cluster, cluster.concurrent_collective_time_s)
    found = rescheduler.plan(SHAPE, 4, TensorLayout(0, mesh, _sg(src)), TensorLayout(0, mesh, _sg(dst)))
    return Counter(found.kinds)


def _sg(placements):
    out = []
    for p in placements:
        out.append(SgShard(p.dim) if isinstance(p, Shard) else SgPartial("sum") if isinstance(p, Partial)
                   else REPLICATE)
    return tuple(out)


def dtensor_plan(mesh_shape, src, dst) -> Counter:
    mesh = init_device_mesh("cpu", mesh_shape)
    meta = TensorMeta(torch.Size(SHAPE), (SHAPE[1], 1), torch.float32)
    infos = _gen_transform_infos_non_cached(DTensorSpec(mesh, src, meta), DTensorSpec(mesh, dst, meta), False)
    return Counter(k for k in (info._comm_type_key() for info in infos) if k is not None)


def dtensor_issued(mesh_shape, src, dst) -> Counter:
    mesh = init_device_mesh("cpu", mesh_shape)
    local = list(SHAPE)
    for size, p in zip(mesh_shape, src):
        if isinstance(p, Shard):
            local[p.dim] //= size
    tensor = DTensor.from_local(torch.empty(local, device="meta"), mesh, src, run_check=False)
    with CommDebugMode() as comm:
        tensor.redistribute(mesh, dst)
    names = {"all_gather_into_tensor": "all_gather", "reduce_scatter_tensor": "reduce_scatter",
             "all_reduce": "all_reduce", "all_to_all_single": "all_to_all"}
    return Counter({names[str(op).split(".")[-1]]: n for op, n in comm.get_comm_counts().items()})


@pytest.mark.parametrize("mesh, src, dst", CASES, ids=lambda v: str(v).replace(" ", ""))
def test_same_collectives_as_dtensor_planner(fake_world, mesh, src, dst):
    assert ours(mesh, src, dst) == dtensor_plan(mesh, src, dst)


@pytest.mark.parametrize("mesh, src, dst", CASES, ids=lambda v: str(v).replace(" ", ""))
def test_same_collectives_as_dtensor_issues(fake_world, mesh, src, dst):
    planned = dtensor_plan(mesh, src, dst)
    if "all_to_all" in planned:
        pytest.skip("DTensor's CPU backend replaces all-to-all by all-gather")
    assert ours(mesh, src, dst) == dtensor_issued(mesh, src, dst) == planned
