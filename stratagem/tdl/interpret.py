"""A numpy interpreter for descriptions: the reference the ground-truth tests run.

Every index variable of the description gets its own array axis; a value is an array broadcast
over the axes of the indices it uses; a reducer folds its indices' axes. A worker is evaluated on
*only* its input regions: each input arrives as a block with its global origin, and reading an
in-bounds element outside that block raises `RegionViolation`, so a region the analysis made too
small cannot go unnoticed. `Coverage` records which elements each worker did read, so tests can
also check that no worker was handed more than it reads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stratagem.tdl.expr import (
    FULL, Access, Apply, Const, IndexValue, OpaqueResult, Reduce, Value, Where,
)
from stratagem.tdl.indexing import IndexCond, IndexProduct, evaluate
from stratagem.tdl.rng import uniform


class RegionViolation(AssertionError):
    """A worker read an element of an input outside the region it was given."""


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


NUMPY_FUNCTIONS = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "log1p": np.log1p,
    "expm1": np.expm1, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "sin": np.sin,
    "cos": np.cos, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "atan2": np.arctan2,
    "uniform": uniform, "tanh": np.tanh, "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "erf": _erf,
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "sign": np.sign,
    "reciprocal": lambda x: 1.0 / x, "trunc": np.trunc, "not": lambda x: np.logical_not(x).astype(float),
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "max": np.maximum, "min": np.minimum, "fmod": np.fmod, "remainder": np.remainder,
    "eq": lambda a, b: np.equal(a, b).astype(float), "ne": lambda a, b: np.not_equal(a, b).astype(float),
    "lt": lambda a, b: np.less(a, b).astype(float), "le": lambda a, b: np.less_equal(a, b).astype(float),
    "gt": lambda a, b: np.greater(a, b).astype(float), "ge": lambda a, b: np.greater_equal(a, b).astype(float),
    "and": lambda a, b: np.logical_and(a, b).astype(float), "or": lambda a, b: np.logical_or(a, b).astype(float),
}
REDUCE_FUNCTIONS = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}


@dataclass
class Block:
    """A worker's copy of (part of) an input: `data` holds global elements starting at `origin`."""

    data: np.ndarray
    origin: tuple[int, ...]
    full_shape: tuple[int, ...]

    @staticmethod
    def whole(array: np.ndarray) -> "Block":
        return Block(array, (0,) * array.ndim, array.shape)

    @staticmethod
    def of_region(array: np.ndarray, box: Sequence[tuple[int, int]]) -> "Block":
        return Block(array[tuple(slice(a, b) for a, b in box)].copy(), tuple(a for a, _ in box), array.shape)


@dataclass
class Coverage:
    """Per input, a boolean mask over the full tensor of the elements that were read."""

    masks: dict[int, np.ndarray] = field(default_factory=dict)

    def mark(self, position: int, full_shape: tuple[int, ...], indices: list[np.ndarray]) -> None:
        mask = self.masks.setdefault(position, np.zeros(full_shape, dtype=bool))
        mask[tuple(indices)] = True


class Interpreter:
    def __init__(self, desc: Any, ranges: Mapping[int, tuple[int, int]], blocks: Sequence[Block | None],
                 coverage: Coverage | None = None):
        self.desc, self.blocks, self.coverage = desc, blocks, coverage
        uids = [v.uid for v in desc.output_vars] + [u for u in desc.extents if u not in
                                                     {v.uid for v in desc.output_vars}]
        self.axis = {u: a for a, u in enumerate(uids)}
        self.ranges = ranges
        self.grids = {u: self._grid(u) for u in uids}

    def _grid(self, uid: int) -> np.ndarray:
        lo, hi = self.ranges[uid]
        shape = [1] * len(self.axis)
        shape[self.axis[uid]] = hi - lo + 1
        return np.arange(lo, hi + 1).reshape(shape)

    def run(self, value: Value) -> np.ndarray:
        result = np.asarray(self.eval(value, np.True_), dtype=np.float64)
        out_axes = [self.axis[v.uid] for v in self.desc.output_vars]
        shape = [1] * len(self.axis)
        for v in self.desc.output_vars:
            shape[self.axis[v.uid]] = self.ranges[v.uid][1] - self.ranges[v.uid][0] + 1
        result = np.broadcast_to(result.reshape(result.shape + (1,) * (len(shape) - result.ndim)), shape)
        others = tuple(a for a in range(len(shape)) if a not in out_axes)
        result = result.squeeze(axis=others) if others else result
        return np.array(result, dtype=np.float64, order="C")   # ascontiguousarray makes 0-d 1-d

    def eval(self, node: Value, mask: Any) -> Any:
        if isinstance(node, Access):
            return self._access(node, mask)
        if isinstance(node, Const):
            return np.float64(node.value)
        if isinstance(node, IndexValue):
            return self.eval_index(node.index).astype(np.float64)
        if isinstance(node, Apply):
            args = [self.eval(a, mask) for a in node.args]
            with np.errstate(all="ignore"):
                return NUMPY_FUNCTIONS[node.fn](*args)
        if isinstance(node, Where):
            if isinstance(node.cond, IndexCond):   # branches read only where their condition holds
                cond = self._cond(node.cond)
                then, other = self.eval(node.then, mask & cond), self.eval(node.otherwise, mask & ~cond)
            else:                                    # a data-dependent choice reads both branches
                cond = self.eval(node.cond, mask) != 0
                then, other = self.eval(node.then, mask), self.eval(node.otherwise, mask)
            return np.where(cond, then, other)
        if isinstance(node, Reduce):
            return self._reduce(node, mask)
        if isinstance(node, OpaqueResult):
            return self._opaque(node, mask)
        raise TypeError(f"cannot evaluate {node!r}")

    def eval_index(self, index: Any) -> np.ndarray:
        if isinstance(index, IndexProduct):
            return self.eval_index(index.left) * self.eval_index(index.right)
        return np.asarray(evaluate(index, self.grids))

    def _cond(self, cond: IndexCond) -> np.ndarray:
        value = evaluate(cond.expr, self.grids)
        ops = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
               "==": np.equal, "!=": np.not_equal}
        return ops[cond.relation](value, 0)

    def _reduce(self, node: Reduce, mask: Any) -> np.ndarray:
        body = np.asarray(self.eval(node.body, mask), dtype=np.float64)
        shape = list(np.broadcast_shapes(body.shape, (1,) * len(self.axis)))
        for v in node.vars:
            lo, hi = self.ranges[v.uid]
            shape[self.axis[v.uid]] = hi - lo + 1
        body = np.broadcast_to(body.reshape(body.shape + (1,) * (len(shape) - body.ndim)),
                               np.broadcast_shapes(body.shape + (1,) * (len(shape) - body.ndim), tuple(shape)))
        axes = tuple(self.axis[v.uid] for v in node.vars)
        return REDUCE_FUNCTIONS[node.reducer](body, axis=axes, keepdims=True)

    def _gather(self, acc: Access, mask: Any) -> tuple[np.ndarray, list[np.ndarray], np.ndarray, np.ndarray]:
        """Look up the indexed (non-':') dims: (data with ':' dims trailing, global idx, inside, wanted)."""
        ref, block = acc.tensor, self.blocks[acc.tensor.position]
        dims = [d for d, i in enumerate(acc.indices) if i is not FULL]
        index_arrays = [self.eval_index(acc.indices[d]) for d in dims]
        shape = np.broadcast_shapes(*(a.shape for a in index_arrays), np.shape(mask))
        idx = [np.broadcast_to(a, shape) for a in index_arrays]
        inside = np.ones(shape, dtype=bool)
        for d, a in zip(dims, idx):
            inside &= (a >= 0) & (a < ref.shape[d])
        wanted = np.broadcast_to(mask, shape) & inside
        if acc.pad is None and np.any(np.broadcast_to(mask, shape) & ~inside):
            raise RegionViolation(f"{acc!r} read outside {ref.name}'s bounds")
        if block is None:
            if np.any(wanted):
                raise RegionViolation(f"{acc!r}: worker was given no part of {ref.name}")
            return np.zeros(shape), idx, inside, wanted
        local = []
        for d, a in zip(dims, idx):
            rel = a - block.origin[d]
            if np.any(wanted & ((rel < 0) | (rel >= block.data.shape[d]))):
                raise RegionViolation(f"{acc!r} read {ref.name} dim {d} outside the worker's region "
                                      f"[{block.origin[d]}, {block.origin[d] + block.data.shape[d]})")
            local.append(np.clip(rel, 0, block.data.shape[d] - 1))
        full_dims = [d for d, i in enumerate(acc.indices) if i is FULL]
        for d in full_dims:
            if block.origin[d] != 0 or block.data.shape[d] != ref.shape[d]:
                raise RegionViolation(f"{acc!r} needs all of {ref.name} dim {d}")
        order = dims + full_dims
        data = np.moveaxis(block.data, order, list(range(len(order))))
        if self.coverage is not None:
            seen = self.coverage.masks.setdefault(ref.position, np.zeros(ref.shape, dtype=bool))
            view = np.moveaxis(seen, order, list(range(len(order))))
            view[tuple(a[wanted] for a in idx)] = True
        return data[tuple(local)], idx, inside, wanted

    def _access(self, acc: Access, mask: Any) -> np.ndarray:
        values, _, inside, _ = self._gather(acc, mask)
        pad = 0.0 if acc.pad is None else acc.pad
        return np.where(inside, values.astype(np.float64), pad)

    def _opaque(self, node: OpaqueResult, mask: Any) -> np.ndarray:
        n = len(self.axis)
        args = []
        for acc in node.call.args:
            arr = np.asarray(self._gather(acc, mask)[0], dtype=np.float64)
            lead = arr.ndim - sum(1 for i in acc.indices if i is FULL)
            arr = arr.reshape(arr.shape[:lead] + (1,) * (n - lead) + arr.shape[lead:]) if lead < n else arr
            args.append(arr)
        result = np.asarray(node.call.fn.impl(*args))
        index = [np.asarray(evaluate(i, self.grids)) for i in node.indices]
        lead_index = []
        for a in range(n):
            size = result.shape[a]
            shape = [1] * n
            shape[a] = size
            lead_index.append(np.arange(size).reshape(shape) if size > 1 else np.zeros([1] * n, dtype=int))
        return result[tuple(lead_index) + tuple(index)]


def run_worker(analysis: Any, inputs: Sequence[np.ndarray], assignment: Mapping[str, tuple[int, int]],
               *, first_in_reduction: bool = True, restrict_to_regions: bool = True,
               coverage: Coverage | None = None) -> list[np.ndarray]:
    """Outputs of one worker computing `assignment`, given only the regions the analysis assigns."""
    share = analysis.share(assignment, first_in_reduction)
    if restrict_to_regions:
        blocks = [None if box is None else Block.of_region(a, box)
                  for a, box in zip(inputs, share.input_boxes)]
    else:
        blocks = [Block.whole(a) for a in inputs]
    ranges = analysis.ranges_for(assignment)
    interp = Interpreter(analysis.desc, ranges, blocks, coverage)
    outputs = analysis._worker_outputs(share.partial, first_in_reduction)
    return [interp.run(o) for o in outputs]


def run_full(analysis: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The whole operator on whole inputs."""
    return run_worker(analysis, inputs, {}, restrict_to_regions=False)
