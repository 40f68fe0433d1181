"""Ground truth for every library op: the description against torch, and every derived split
against running the op on exactly the regions the analysis gives each worker.

For each op (CASES in cases.py, random uneven shapes, seeded by the op's name):
  a. the numpy interpreter on whole inputs equals the torch implementation;
  b. for every dim and k in {2, 3} that `can_split`, workers run on only their regions (reading
     outside raises RegionViolation) and their outputs, concatenated (case 1) or reduced (case 2),
     equal the whole output;
  c. each worker reads every element of its regions that the whole op reads, and nothing else;
  d. for regular splits (every placement R or S(d)), the torch implementation run on the sliced
     regions and combined the same way equals the whole output, except NOT_SHARD_LOCAL below.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pytest
import torch

from stratagem.frontend.torch_ops import TORCH_OPS
from stratagem.tdl.analysis import Analysis, Split
from stratagem.tdl.interpret import Coverage, run_full, run_worker
from stratagem.tdl.library import LIBRARY

from .cases import CASES, Case, sampler

OPS = sorted(name for name in LIBRARY if name != "opaque")
PARTS = (2, 3)
REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}

# Ops whose torch implementation cannot run on a shard as it stands, and which of their dims:
# "reduction" (every reduction dim) or a set of dim names. Each says why.
NOT_SHARD_LOCAL: dict[str, tuple[Any, str]] = {}


@dataclass(frozen=True)
class Instance:
    case: Case
    analysis: Analysis
    arrays: tuple[np.ndarray, ...]
    kinds: tuple[str, ...]


def _seed(name: str) -> int:
    return zlib.crc32(name.encode())


@lru_cache(maxsize=None)
def instances(name: str) -> tuple[Instance, ...]:
    rng = np.random.default_rng(_seed(name))
    found = []
    for case in CASES[name](rng):
        desc = LIBRARY[name].describe(*case.shapes, **case.attrs)
        present = [s for s in case.shapes if s is not None]
        kinds = case.values or ("normal",) * len(present)
        arrays = tuple(np.asarray(sampler(k)(rng, tuple(s)), dtype=np.float64)
                       for k, s in zip(kinds, present))
        found.append(Instance(case, Analysis(desc), arrays, tuple(kinds)))
    return tuple(found)


def to_torch(array: np.ndarray | None, kind: str) -> torch.Tensor | None:
    if array is None:
        return None
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    if kind.startswith("int"):
        return tensor.long()
    return tensor.bool() if kind == "bool" else tensor


def as_numpy(result: Any) -> list[np.ndarray]:
    results = result if isinstance(result, (tuple, list)) else (result,)
    return [r.detach().to(torch.float64).numpy() for r in results]


def run_torch(name: str, inst: Instance, arrays, out_shape) -> list[np.ndarray]:
    attrs = LIBRARY[name]._bind_attrs(inst.case.attrs)
    tensors = [to_torch(a, k) for a, k in zip(arrays, inst.kinds)]
    while tensors and tensors[-1] is None:
        tensors.pop()
    return as_numpy(TORCH_OPS[name](tensors, attrs, tuple(out_shape)))


def assert_close(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        assert g.shape == w.shape, f"{what}: shape {g.shape} != {w.shape}"
        np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-9, equal_nan=True, err_msg=what)


def combine(split: Split, analysis: Analysis, per_worker: list[list[np.ndarray]]) -> list[np.ndarray]:
    if split.combine == "concat":
        axis = analysis.output_dim_index(split.dim)
        return [np.concatenate([w[i] for w in per_worker], axis=axis) for i in range(len(per_worker[0]))]
    fold = REDUCE[split.combine]
    out = [np.array(o, copy=True) for o in per_worker[0]]
    for worker in per_worker[1:]:
        out = [fold(a, b) for a, b in zip(out, worker)]
    return out


def splits(analysis: Analysis):
    for dim in analysis.dims:
        for parts in PARTS:
            if analysis.can_split(dim.name, parts):
                yield analysis.split(dim.name, parts)


def assignment(split: Split, analysis: Analysis, worker: int) -> dict[str, tuple[int, int]]:
    return {split.dim: analysis.chunk(split.dim, split.parts, worker)}


def box_mask(shape: tuple[int, ...], box) -> np.ndarray:
    mask = np.zeros(shape, dtype=bool)
    if box is not None:
        mask[tuple(slice(a, b) for a, b in box)] = True
    return mask


# ---- a: the description computes what torch computes ----------------------------------------

@pytest.mark.parametrize("name", OPS)
def test_interpreter_matches_torch(name):
    for inst in instances(name):
        want = run_torch(name, inst, inst.arrays, inst.analysis.output_shape)
        got = run_full(inst.analysis, inst.arrays)
        assert_close(got, want, f"{name} {inst.case}")


# ---- b, c: every derived split, worker by worker ---------------------------------------------

@pytest.mark.parametrize("name", OPS)
def test_splits_reassemble_and_read_exactly_their_regions(name):
    for inst in instances(name):
        full_reads = Coverage()
        whole = run_worker(inst.analysis, inst.arrays, {}, restrict_to_regions=False,
                           coverage=full_reads)
        for split in splits(inst.analysis):
            outputs = []
            for w in range(split.parts):
                reads = Coverage()
                outputs.append(run_worker(inst.analysis, inst.arrays, assignment(split, inst.analysis, w),
                                          first_in_reduction=(w == 0), coverage=reads))
                check_coverage(inst, split, w, reads, full_reads)
            assert_close(combine(split, inst.analysis, outputs), whole,
                         f"{name} {inst.case} split {split.dim} x{split.parts}")


def check_coverage(inst: Instance, split: Split, worker: int, reads: Coverage, full: Coverage) -> None:
    for pos, array in enumerate(inst.arrays):
        box = split.workers[worker].input_boxes[pos]
        read = reads.masks.get(pos, np.zeros(array.shape, dtype=bool))
        needed = full.masks.get(pos, np.zeros(array.shape, dtype=bool)) & box_mask(array.shape, box)
        assert np.array_equal(read, needed), (
            f"{inst.analysis.name} split {split.dim} x{split.parts} worker {worker} input {pos}: "
            f"given {box}, read {int(read.sum())} of the {int(needed.sum())} elements it needs there")


# ---- d: the torch kernel on exactly the input regions -----------------------------------------

def shard_local(name: str, analysis: Analysis, split: Split) -> bool:
    if name not in NOT_SHARD_LOCAL:
        return True
    dims, _ = NOT_SHARD_LOCAL[name]
    if dims == "reduction":
        return not analysis.dim(split.dim).is_reduction
    return split.dim not in dims


@pytest.mark.parametrize("name", OPS)
def test_torch_on_regions_reassembles(name):
    for inst in instances(name):
        whole = run_torch(name, inst, inst.arrays, inst.analysis.output_shape)
        for split in splits(inst.analysis):
            if not split.is_regular or not shard_local(name, inst.analysis, split):
                continue
            outputs = []
            for share in split.workers:
                local = [None if box is None else a[tuple(slice(s, e) for s, e in box)]
                         for a, box in zip(inst.arrays, share.input_boxes)]
                out_shape = tuple(e - s for s, e in share.output_box)
                outputs.append(run_torch(name, inst, local, out_shape))
            assert_close(combine(split, inst.analysis, outputs), whole,
                         f"{name} {inst.case} torch on regions, split {split.dim} x{split.parts}")


def test_every_op_has_cases_and_an_implementation():
    assert sorted(CASES) == OPS
    assert sorted(TORCH_OPS) == OPS


def test_not_shard_local_names_real_ops_and_dims():
    for name, (dims, reason) in NOT_SHARD_LOCAL.items():
        assert name in LIBRARY and reason
        if dims != "reduction":
            known = {d.name for inst in instances(name) for d in inst.analysis.dims}
            assert set(dims) <= known, (name, dims, known)
