"""Ground truth for every library op: the description against torch, and every derived split
against running the op on exactly the regions the analysis gives each worker.

For each op (CASES in cases.py, random uneven shapes, seeded by the op's name):
  a. the numpy interpreter on whole inputs equals the torch implementation;
  b. for every dim and k in {2, 3} that `can_split`, workers run on only their regions (reading
     outside raises RegionViolation) and their outputs, concatenated (case 1) or reduced (case 2),
     equal the whole output;
  c. each worker reads every element of its regions that the whole op reads, and nothing else;
  d. for regular splits (every placement R or S(d)), the torch implementation run on what each
     worker holds under the placements (its chunk for S(d), the whole tensor for R, nothing where
     it reads nothing) and combined the same way equals the whole output, except the splits that
     NOT_SHARD_LOCAL below picks, each with its reason.
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
from stratagem.tdl.rounding import op_steps, unit_roundoff

from .cases import CASES, Case, sampler

pytestmark = pytest.mark.numerics     # run under every kernel path by scripts/numerics_variants.sh

OPS = sorted(name for name in LIBRARY if name != "opaque")
PARTS = (2, 3)
REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}



def _reduction(analysis, split):
    return analysis.dim(split.dim).is_reduction


def _named(*names):
    return lambda analysis, split: split.dim in names


def _attr_dim(attr, *, last=0):
    """The output dim named by the op's attribute `attr` (softmax's dim), or its last `last` dims."""
    def chosen(analysis, split):
        rank = len(analysis.output_shape)
        if last:
            return analysis.output_dim_index(split.dim) in range(rank - last, rank)
        return analysis.output_dim_index(split.dim) == analysis.desc.attrs[attr] % rank
    return chosen


def _normalized(analysis, split):
    count = len(analysis.desc.attrs["normalized_shape"])
    index = analysis.output_dim_index(split.dim)
    return index is not None and index >= len(analysis.output_shape) - count


def _padded(analysis, split):
    pad, rank = analysis.desc.attrs["pad"], len(analysis.output_shape)
    index = analysis.output_dim_index(split.dim)
    return any(pad[2 * k:2 * k + 2] != (0, 0) and index == rank - 1 - k for k in range(len(pad) // 2))


def _repeated(analysis, split):
    repeats = analysis.desc.attrs["repeats"]
    return repeats[analysis.output_dim_index(split.dim)] > 1


def _everything(analysis, split):
    return True


def _keys_or_dropped(analysis, split):
    dropped = analysis.desc.attrs.get("dropout_p") and split.dim in ("b", "h", "i")
    return _reduction(analysis, split) or bool(dropped)


WINDOW = ("the window of each output position is placed on the whole padded input; a shard of "
          "positions or kernel offsets needs its own padding and offsets (a halo exchange)")
GLOBAL_COUNT = "divides by the element count of the whole reduction, a shard by its own"
WHOLE_ROW = ("normalizes along the split dim: each worker needs whole rows (x replicated), so the "
             "kernel computes every column and the worker keeps its chunk")
GLOBAL_INDEX = "its values depend on each element's global position, which a shard does not know"
ONE_HOT = ("a shard of the gathered dim needs the indices shifted and masked to it "
           "(vocab-parallel embedding does that)")

# Ops whose torch implementation does not run as it is on a shard, for the splits the predicate
# picks, and why. The TDL interpreter (b, c) checks those splits all the same.
NOT_SHARD_LOCAL: dict[str, tuple[Any, str]] = {
    **{name: (_named("l", "k"), WINDOW) for name in ("conv1d", "max_pool1d", "avg_pool1d")},
    **{name: (_named("h", "w", "kh", "kw"), WINDOW) for name in ("conv2d", "max_pool2d", "avg_pool2d")},
    **{name: (_named("d", "h", "w", "kd", "kh", "kw"), WINDOW) for name in ("max_pool3d", "avg_pool3d")},
    "adaptive_avg_pool3d": (_reduction, GLOBAL_COUNT),
    "adaptive_avg_pool1d": (_reduction, GLOBAL_COUNT),
    "adaptive_avg_pool2d": (_reduction, GLOBAL_COUNT),
    "mean": (_reduction, GLOBAL_COUNT), "var": (_reduction, GLOBAL_COUNT),
    "mse_loss": (_reduction, GLOBAL_COUNT),
    "cross_entropy": (_reduction, GLOBAL_COUNT + "; targets are replicated to count the ignored"),
    "nll_loss": (_reduction, GLOBAL_COUNT + "; targets are replicated to count the ignored"),
    "cumsum": (_reduction, "a shard of t sums a prefix of its own chunk, not of the whole dim"),
    "argmax": (_reduction, "positions are global; the kernel on a shard gives local ones"),
    "argmin": (_reduction, "positions are global; the kernel on a shard gives local ones"),
    "softmax": (_attr_dim("dim"), WHOLE_ROW), "log_softmax": (_attr_dim("dim"), WHOLE_ROW),
    "layer_norm": (_normalized, WHOLE_ROW), "rms_norm": (_normalized, WHOLE_ROW),
    "group_norm": (lambda analysis, split: split.dim != "b",
                   WHOLE_ROW + "; num_groups counts the groups of the whole channel dim"),
    "batch_norm_stats": (_named("s"), "row s = 0 is the sum, s = 1 the sum of squares; a shard of "
                                      "s does not know which it holds"),
    "scaled_dot_product_attention": (_keys_or_dropped, "a shard of keys j normalizes by the softmax "
                                                       "denominator over all keys, the kernel by its "
                                                       "own; with dropout, a shard of b, h or i draws "
                                                       "its mask at its own positions, not the global"),
    "triu": (_attr_dim(None, last=2), "the diagonal is placed by global row and column"),
    "tril": (_attr_dim(None, last=2), "the diagonal is placed by global row and column"),
    "pad": (_padded, "pads the ends of the whole dim, not of each shard"),
    "reflection_pad": (_padded, "pads the ends of the whole dim, not of each shard"),
    "replication_pad": (_padded, "pads the ends of the whole dim, not of each shard"),
    "slice_scatter": (_attr_dim("dim"), "the slice is placed by global position along dim"),
    "select_scatter": (_attr_dim("dim"), "the index is a global position along dim"),
    "scatter_add": (_attr_dim("dim"), "the indices are global positions along dim"),
    "repeat": (_repeated, "a chunk of a tiled dim need not hold whole tiles"),
    "embedding": (_reduction, ONE_HOT), "index_select": (_reduction, ONE_HOT),
    "gather": (_reduction, ONE_HOT),
    "arange": (_everything, GLOBAL_INDEX), "dropout": (_everything, GLOBAL_INDEX),
}


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
    attrs = LIBRARY[name].attrs_with_defaults(inst.case.attrs)
    tensors = [to_torch(a, k) for a, k in zip(arrays, inst.kinds)]
    while tensors and tensors[-1] is None:
        tensors.pop()
    return as_numpy(TORCH_OPS[name](tensors, attrs, tuple(out_shape)))


def assert_close(got: list[np.ndarray], want: list[np.ndarray], what: str, analysis: Analysis) -> None:
    """Equal within the op's rounding in float64 (stratagem.tdl.rounding): each side is within
    2 u steps of the exact value (a libm function within 1 ulp, i.e. 2 u, counted as one step), so
    they differ by at most 4 u steps, at the scale of the largest value (a difference of near-equal
    values is judged at their size)."""
    assert len(got) == len(want), what
    rtol = 4 * unit_roundoff("float64") * op_steps(analysis, sum(w.size for w in want))
    for g, w in zip(got, want):
        assert g.shape == w.shape, f"{what}: shape {g.shape} != {w.shape}"
        finite = np.abs(w[np.isfinite(w)])
        scale = float(finite.max()) if finite.size else 0.0
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale, equal_nan=True, err_msg=what)


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
        assert_close(got, want, f"{name} {inst.case}", inst.analysis)


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
                         f"{name} {inst.case} split {split.dim} x{split.parts}", inst.analysis)


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
    return name not in NOT_SHARD_LOCAL or not NOT_SHARD_LOCAL[name][0](analysis, split)


def local_input(array: np.ndarray, placement: str, box, split: Split, worker: int) -> np.ndarray | None:
    """What a worker holds under the split's placements: None if it reads nothing, the whole
    tensor for R, its even chunk of dim d for S(d)."""
    if box is None:
        return None
    if placement == "R":
        return array
    d = int(placement[2:-1])
    n = array.shape[d]
    start, stop = worker * n // split.parts, (worker + 1) * n // split.parts
    return array[(slice(None),) * d + (slice(start, stop),)]


@pytest.mark.parametrize("name", OPS)
def test_torch_on_regions_reassembles(name):
    for inst in instances(name):
        whole = run_torch(name, inst, inst.arrays, inst.analysis.output_shape)
        for split in splits(inst.analysis):
            if not split.is_regular or not shard_local(name, inst.analysis, split):
                continue
            outputs = []
            for w, share in enumerate(split.workers):
                local = [local_input(a, p, box, split, w) for a, p, box in
                         zip(inst.arrays, split.placements, share.input_boxes)]
                out_shape = tuple(e - s for s, e in share.output_box)
                outputs.append(run_torch(name, inst, local, out_shape))
            assert_close(combine(split, inst.analysis, outputs), whole,
                         f"{name} {inst.case} torch on regions, split {split.dim} x{split.parts}", inst.analysis)


def test_every_op_has_cases_and_an_implementation():
    assert sorted(CASES) == OPS
    assert sorted(TORCH_OPS) == OPS


def test_not_shard_local_names_real_ops_that_have_such_splits():
    for name, (chosen, reason) in NOT_SHARD_LOCAL.items():
        assert name in LIBRARY and reason
        picked = [split for inst in instances(name) for split in splits(inst.analysis)
                  if chosen(inst.analysis, split)]
        assert picked, f"{name}: the exemption picks no split of its cases"
