"""Frontier tables and the one operation FT is made of.

A table holds one frontier per index: a node's per configuration k, an edge's per pair (k, p), a
finished component's with no index at all. Arrays are mem/time of shape [*index, L], padded +inf.

`combine(terms, out_sizes, k_size)` is TensorOpt's product-union-reduce in one step:

    result[o] = reduce( union_k  product_t  term_t[index_t(o, k)] )

Every elimination and every LDP step is one call with different terms: node elimination
(Eq. 4) is terms E_hi[(o0,k)], N_i[(k,)], E_ij[(k,o1)]; edge elimination (Eq. 5) is E1[(o0,o1)],
E2[(o0,o1)] with no k; LDP (Algorithm 3, line 6) is CF_{i-1}[(k,)], E[(k,o0)], N_i[(o0,)].
Each result slot remembers k and the slot it used in every term (`Combined`), which is how a
frontier point unrolls back to a configuration for every node (`unroll_all`).

Repeated layers are reduced once (`Memo`): every table has a `key`, a digest of its content (a
leaf's arrays) or of how it was made (a view's child key; a combine's terms' keys and index specs),
and `combine` with a memo returns the arrays of an earlier combine of the same key. A result's
arrays, and the choices behind every slot, depend only on its terms' arrays, so a block of a
model that is eliminated as an earlier identical block was gets that block's arrays; its own
`Combined` still points at its own terms, so it unrolls to its own nodes.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np

from stratagem.search.frontier import INF, reduce_rows, union_of_products
from stratagem.search.union import MAX_TERMS, Terms, prepared_terms, product_of_two, union_of_terms

IndexSpec = tuple[Any, ...]   # per table index dim: "k", ("o", n) an output dim, or an int (fixed)
_CHUNK_ELEMENTS = 1 << 21        # candidates of a box whose candidates are built
_SHARED_ELEMENTS = 1 << 16       # a combine visited with fewer than 4x this is one box


class Table:
    mem: np.ndarray
    time: np.ndarray
    _key: bytes | None = None

    @property
    def key(self) -> bytes:
        """A digest that is equal for two tables only if their arrays are (`Memo`)."""
        if self._key is None:
            self._key = content_key(self.mem, self.time)
        return self._key

    @property
    def index_shape(self) -> tuple[int, ...]:
        return self.mem.shape[:-1]

    @property
    def width(self) -> int:
        return self.mem.shape[-1]

    def expand(self, index: tuple[int, ...], slot: int) -> Iterator[tuple]:
        """Yield ("node", node, k), ("option", edge, r), ("fixed", ...) or (table, index, slot)."""
        raise NotImplementedError

    def children(self) -> tuple["Table", ...]:
        """The tables `expand` may yield (none for a leaf)."""
        return ()


class NodeLeaf(Table):
    def __init__(self, node: int, mem: np.ndarray, time: np.ndarray):
        self.node = node
        self.mem, self.time = mem[:, None].astype(np.float64), time[:, None].astype(np.float64)

    def expand(self, index, slot):
        yield ("node", self.node, index[0])


class EdgeLeaf(Table):
    """Per (k, p), the frontier of the edge's options; oriented as given (src, dst). `reduced`:
    `edge_options(mem, time)` when already made (edges of repeated layers share their arrays)."""

    def __init__(self, edge: int, mem: np.ndarray, time: np.ndarray, reduced: tuple | None = None):
        self.edge = edge
        self.mem, self.time, self.option, self._key = reduced or edge_options(mem, time)

    def expand(self, index, slot):
        yield ("option", self.edge, int(self.option[index + (slot,)]))


def edge_options(mem: np.ndarray, time: np.ndarray) -> tuple:
    """An edge's [R, K_s, K_d] option costs as frontiers per (k, p): (mem, time, option, key)."""
    r, ks, kd = mem.shape
    flat_m = np.moveaxis(mem, 0, -1).reshape(ks * kd, r)
    flat_t = np.moveaxis(time, 0, -1).reshape(ks * kd, r)
    m, t, src = reduce_rows(flat_m, flat_t)
    m, t = m.reshape(ks, kd, -1), t.reshape(ks, kd, -1)
    return m, t, src.reshape(ks, kd, -1), content_key(m, t)


class Transposed(Table):
    """An edge table seen from the other end: index (p, k) instead of (k, p)."""

    def __init__(self, child: Table):
        self.child = child
        self.mem, self.time = np.swapaxes(child.mem, 0, 1), np.swapaxes(child.time, 0, 1)

    @property
    def key(self) -> bytes:
        return digest("transposed", self.child.key)

    def expand(self, index, slot):
        yield (self.child, (index[1], index[0]), slot)

    def children(self):
        return (self.child,)


class Reindexed(Table):
    """A table whose index dim `axis` is read through `mapping` (branch elimination's q -> p)."""

    def __init__(self, child: Table, axis: int, mapping: np.ndarray):
        self.child, self.axis, self.mapping = child, axis, mapping
        self.mem = np.take(child.mem, mapping, axis=axis)
        self.time = np.take(child.time, mapping, axis=axis)

    @property
    def key(self) -> bytes:
        return digest("reindexed", self.child.key, self.axis, self.mapping.tobytes())

    def expand(self, index, slot):
        mapped = list(index)
        mapped[self.axis] = int(self.mapping[index[self.axis]])
        yield (self.child, tuple(mapped), slot)

    def children(self):
        return (self.child,)


@dataclass
class Term:
    table: Table
    spec: IndexSpec


class Combined(Table):
    """Result of `combine`; `node` is the node whose configuration k was unioned away (or None)."""

    def __init__(self, terms: list[Term], node: int | None, mem, time, k_choice, slots, fixed=(),
                 key: bytes | None = None):
        self.terms, self.node, self._key = terms, node, key
        self.mem, self.time = mem, time
        self.k_choice, self.slots = k_choice, slots      # [*out, L], per term [*out, L]
        self.fixed = tuple(fixed)                        # ("node", n, k) facts recorded here

    def expand(self, index, slot):
        k = int(self.k_choice[index + (slot,)])
        if self.node is not None:
            yield ("node", self.node, k)
        yield from self.fixed
        for term, slots in zip(self.terms, self.slots):
            child_index = tuple(_resolve(s, index, k) for s in term.spec)
            yield (term.table, child_index, int(slots[index + (slot,)]))

    def children(self):
        return tuple(term.table for term in self.terms)


def _resolve(spec_entry: Any, index: tuple[int, ...], k: int) -> int:
    if spec_entry == "k":
        return k
    if isinstance(spec_entry, tuple):
        return index[spec_entry[1]]
    return int(spec_entry)


class Memo:
    """Results of `combine` by key: (mem, time, k_choice, slots), arrays no one writes to; and
    edges' option frontiers (`edge_options`) by their arrays' digest.

    FT's peak passes share one memo, and each pass's threshold masks more than the one before
    (search.ft_peak): a result a pass did not use was made from arrays that a later pass masks at
    least as much, so no later pass asks for it again. `settle` ends a pass: the top pass's
    results are kept for good (the second run, hubs fixed as data parallel has them, runs at the
    top again), a later pass's forgets what it did not use (on 16,384 GPUs the passes held
    gigabytes they never read again)."""

    def __init__(self):
        self.results: dict[bytes, tuple] = {}
        self.edges: dict[bytes, tuple] = {}
        self._arrays: dict[tuple[int, int], tuple] = {}   # (id(mem), id(time)) -> (mem, time, options)
        self._used: dict[tuple, int] = {}   # (attribute, key) -> the pass that last used it, or _KEPT
        self._pass = 0
        self.reused = 0         # combines answered from `results`
        self.computed = 0       # combines computed

    def edge_options(self, mem: np.ndarray, time: np.ndarray) -> tuple:
        """tables.edge_options of these arrays: found by the arrays themselves where a pass before
        asked of the same ones (the peak passes share the arrays their threshold leaves as they
        were), else by their content."""
        ids = (id(mem), id(time))
        held = self._arrays.get(ids)
        if held is not None and held[0] is mem and held[1] is time:
            self._use("_arrays", ids)
            return held[2]
        key = content_key(mem, time)
        found = self.edges.get(key)
        if found is None:
            found = self.edges[key] = edge_options(mem, time)
        self._arrays[ids] = (mem, time, found)
        self._use("edges", key)
        self._use("_arrays", ids)
        return found

    def get(self, key: bytes) -> tuple | None:
        found = self.results.get(key)
        if found is not None:
            self.reused += 1
            self._use("results", key)
        return found

    def put(self, key: bytes, found: tuple) -> None:
        self.results[key] = found
        self.computed += 1
        self._use("results", key)

    def settle(self, keep: bool) -> None:
        """A pass ended: with `keep`, what is held now is kept for good; else what this pass did not
        use is forgotten (what was kept for good stays)."""
        if keep:
            self._used = dict.fromkeys(self._used, _KEPT)
        else:
            for which, key in [entry for entry, at in self._used.items() if at != _KEPT and at < self._pass]:
                del getattr(self, which)[key]
                del self._used[(which, key)]
        self._pass += 1

    def _use(self, which: str, key) -> None:
        if self._used.get((which, key)) != _KEPT:
            self._used[(which, key)] = self._pass


_KEPT = -1      # Memo._used: kept for good


def combine(terms: Sequence[Term], out_sizes: Sequence[int], k_size: int | None = None,
            node: int | None = None, fixed: Sequence[tuple] = (), executor: Executor | None = None,
            resolution: float = 0.0, max_width: int | None = None, memo: Memo | None = None,
            lowered: bool = False) -> Combined:
    """result[o] = reduce(union over k of the product over terms). See the module docstring.

    Work proceeds in boxes of the output index (`_boxes`) small enough that each box's candidate
    array stays under _CHUNK_ELEMENTS; boxes run on `executor` when given. With a `memo`, a
    combine of terms with the same keys and specs as an earlier one reuses its arrays. With
    `lowered`, frontiers wider than `max_width` are thinned from below (`lowered_rows`) instead.
    """
    terms = list(terms)
    final_shape = tuple(out_sizes)
    key = digest("combine", final_shape, k_size, resolution, max_width, lowered,
                  *((t.table.key, repr(t.spec)) for t in terms))
    found = memo.get(key) if memo is not None else None
    if found is None:
        found = _combined_arrays(terms, final_shape, k_size, executor, resolution, max_width, lowered)
        if memo is not None:
            memo.put(key, found)
    mem, time, k_choice, slots = found
    return Combined(terms, node if k_size else None, mem, time, k_choice, slots, fixed, key)


def _combined_arrays(terms: list[Term], final_shape: tuple[int, ...], k_size: int | None, executor,
                     resolution: float, max_width: int | None, lowered: bool = False) -> tuple:
    """combine's arrays, box by box; `lowered`: each box's frontiers found whole, then thinned from
    below (`lowered_rows`) before the boxes are put together."""
    lower_to = max_width if lowered else None
    max_width = None if lowered else max_width
    sizes = final_shape or (1,)            # no output index: one virtual row
    k = k_size or 1
    widths = [t.table.width for t in terms]
    node_elimination = resolution == 0 and _is_node_elimination(terms)
    visited = (_visited_terms(terms, len(sizes)) if resolution == 0 and k_size and not node_elimination
               and len(terms) <= MAX_TERMS else None)
    merged = (_visited_terms(terms, len(sizes)) if resolution == 0 and not k_size and len(terms) == 2 else None)
    per_point = k * math.prod(widths)
    chunk = _CHUNK_ELEMENTS
    if node_elimination or visited is not None or merged is not None:    # no candidate array: boxes
        chunk = min(chunk, max(_SHARED_ELEMENTS, math.prod(sizes) * per_point // 4))   # for the threads
    boxes = _boxes(sizes, per_point, chunk)

    def work(box) -> tuple:
        found = _box_arrays(box)
        return found if lower_to is None else lowered_rows(*found, lower_to)

    def _box_arrays(box) -> tuple:
        if node_elimination:
            return _node_elimination_box(terms, k, widths, box, max_width)
        if visited is not None:
            return _visited_box(visited, k, widths, box, max_width)
        if merged is not None:
            found = _merged_box(merged, widths, box, max_width)
            if found is not None:
                return found
        return _combine_box(terms, sizes, k, widths, box, resolution, max_width)

    parts = (list(executor.map(work, boxes)) if executor is not None and len(boxes) > 1
             else [work(b) for b in boxes])
    shape = final_shape + (max(p[0].shape[-1] for p in parts),)
    if len(parts) == 1:                         # one box: the whole index, its arrays as they are
        m, t, kc, sl = parts[0]
        return (m.astype(float, copy=False).reshape(shape), t.astype(float, copy=False).reshape(shape),
                kc.reshape(shape), [s.reshape(shape) for s in sl])
    width = shape[-1]
    mem = np.full(sizes + (width,), INF)
    time = np.full(sizes + (width,), INF)
    k_choice = np.full(sizes + (width,), -1, dtype=_index_dtype(k))
    slots = [np.full(sizes + (width,), -1, dtype=_index_dtype(w)) for w in widths]
    for box, (m, t, kc, sl) in zip(boxes, parts):
        where = tuple(slice(a, b) for a, b in box)
        w = m.shape[-1]
        mem[where + (slice(0, w),)] = m
        time[where + (slice(0, w),)] = t
        k_choice[where + (slice(0, w),)] = kc
        for target, source in zip(slots, sl):
            target[where + (slice(0, w),)] = source
    return (mem.reshape(shape), time.reshape(shape), k_choice.reshape(shape),
            [s.reshape(shape) for s in slots])


def lowered_rows(mem: np.ndarray, time: np.ndarray, k_choice: np.ndarray, slots: list[np.ndarray],
                 width: int) -> tuple:
    """Each frontier of a combine's arrays [*out, L] (memory ascending, +inf after its last tuple)
    thinned from below to `width` tuples: its tuples in `width` groups of consecutive ranks, each
    group stood for by its first tuple's memory and its last tuple's time, no more than any of
    the group's in either (a relaxation, search.ft_bound). A tuple unrolls as its group's first,
    which does not have its costs."""
    full = mem.shape[-1]
    if full <= width:
        return mem, time, k_choice, slots
    shape = mem.shape[:-1] + (width,)
    m, t = mem.reshape(-1, full), time.reshape(-1, full)
    count = np.isfinite(m).sum(axis=1)[:, None]
    group = np.arange(width)[None, :]
    wide = count > width
    valid = group < np.minimum(count, width)
    first = np.where(valid, np.where(wide, (group * count + width - 1) // width, group), 0)
    last = np.where(valid, np.where(wide, ((group + 1) * count + width - 1) // width - 1, group), 0)

    def gathered(a: np.ndarray, at: np.ndarray) -> np.ndarray:
        return np.take_along_axis(a.reshape(-1, full), at, axis=1).reshape(shape)

    return (np.where(valid.reshape(shape), gathered(m, first), INF),
            np.where(valid.reshape(shape), gathered(t, last), INF),
            gathered(k_choice, first), [gathered(s, first) for s in slots])


def content_key(mem: np.ndarray, time: np.ndarray) -> bytes:
    """A table's key from its arrays: equal only for equal shapes and values. SHA-1 over the
    arrays' buffers (no copies): 3.5x faster here than blake2b over their bytes, and what is
    hashed is never adversarial (hf:llama-7b hashes ~1,000 edge tables per FT pass)."""
    h = hashlib.sha1(repr(("content", mem.shape, mem.dtype.str, time.dtype.str)).encode())
    h.update(np.ascontiguousarray(mem))
    h.update(np.ascontiguousarray(time))
    return h.digest()


def digest(*parts: Any) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        h.update(part if isinstance(part, bytes) else repr(part).encode())
        h.update(b"|")
    return h.digest()


def _boxes(sizes: tuple[int, ...], per_point: int, chunk: int) -> list[tuple[tuple[int, int], ...]]:
    """Boxes covering the output index, each with at most `chunk` candidates (or one point of the
    first two dims, whatever that costs)."""
    rest = math.prod(sizes[2:]) if len(sizes) > 2 else 1
    second = sizes[1] if len(sizes) > 1 else 1
    per_row = per_point * rest * second
    if per_row <= chunk or len(sizes) == 1:
        step = max(1, chunk // max(1, per_row))
        return [((a, min(a + step, sizes[0])),) + tuple((0, n) for n in sizes[1:])
                for a in range(0, sizes[0], step)]
    step = max(1, chunk // max(1, per_point * rest))
    return [((a, a + 1), (b, min(b + step, second))) + tuple((0, n) for n in sizes[2:])
            for a in range(sizes[0]) for b in range(0, second, step)]


def _visited_terms(terms: Sequence[Term], dims: int) -> Terms:
    """The terms as union.union_of_terms reads them: each table flattened to rows [R, W], and its
    row as an affine function of (output index, k), from its spec (an output dim, k or a fixed
    configuration) and its index dims' row-major strides."""
    coefficients = np.zeros((len(terms), dims + 1), dtype=np.int64)
    bases = np.zeros(len(terms), dtype=np.int64)
    tables = []
    for t, term in enumerate(terms):
        shape = term.table.index_shape
        for axis, entry in enumerate(term.spec):
            stride = math.prod(shape[axis + 1:])
            if entry == "k":
                coefficients[t, dims] += stride
            elif isinstance(entry, tuple):
                coefficients[t, entry[1]] += stride
            else:
                bases[t] += int(entry) * stride
        rows = math.prod(shape)
        tables.append((term.table.mem.reshape(rows, term.table.width), term.table.time.reshape(rows, term.table.width)))
    return prepared_terms(tables, coefficients, bases)


def _node_elimination_box(terms, k, widths, box, max_width):
    """Node elimination's box by frontier.union_of_products."""
    (h0, h1), (j0, j1) = box
    a, b = terms[0].table, terms[1].table
    m, tm, src = union_of_products(a.mem[h0:h1], a.time[h0:h1], b.mem[:, j0:j1], b.time[:, j0:j1], max_width)
    return _boxed(m, tm, src, (h1 - h0, j1 - j0), k, widths)


def _is_node_elimination(terms: Sequence[Term]) -> bool:
    """Terms A[(o0, k)], B[(k, o1)]: node elimination's union of products (frontier.union_of_products)."""
    return (len(terms) == 2 and terms[0].spec == (("o", 0), "k") and terms[1].spec == ("k", ("o", 1)))


def _merged_box(merged: Terms, widths, box, max_width):
    """A product of two tables' box by merging their rows' sorted lists (union.product_of_two);
    None when a row is not memory ascending."""
    rows = tuple(b - a for a, b in box)
    found = product_of_two(merged, tuple(a for a, _ in box), rows, max_width)
    return None if found is None else _boxed(*found, rows, 1, widths)


def _visited_box(visited: Terms, k, widths, box, max_width):
    """An exact combine's box by visiting its candidates (union.union_of_terms), not building them."""
    rows = tuple(b - a for a, b in box)
    m, tm, src = union_of_terms(visited, tuple(a for a, _ in box), rows, k, max_width)
    return _boxed(m, tm, src, rows, k, widths)


def _combine_box(terms, sizes, k, widths, box, resolution, max_width):
    """A combine's box by building its candidates and reducing them (reduce_rows)."""
    rows = tuple(b - a for a, b in box)
    mem = np.zeros(rows + (k,) + tuple(widths))
    time = np.zeros_like(mem)
    for t, term in enumerate(terms):
        m, tm = _aligned(term, box, t, len(terms))
        mem = mem + m
        time = time + tm
    flat_rows = math.prod(rows)
    m, tm, src = reduce_rows(mem.reshape(flat_rows, -1), time.reshape(flat_rows, -1), resolution, max_width)
    return _boxed(m, tm, src, rows, k, widths)


def _boxed(m, tm, src, rows, k, widths):
    """A box's frontiers [rows, L] and source columns as (mem, time, k choice, per term slot), the
    choices in the least integer type that holds them (`_index_dtype`)."""
    valid = src >= 0
    coords = _unravelled(np.where(valid, src, 0), (k,) + tuple(widths))
    shape = rows + (m.shape[-1],)

    def choices(column: np.ndarray, bound: int) -> np.ndarray:
        return np.where(valid, column, -1).astype(_index_dtype(bound)).reshape(shape)

    return (m.reshape(shape), tm.reshape(shape), choices(coords[0], k),
            [choices(c, w) for c, w in zip(coords[1:], widths)])


def _index_dtype(bound: int) -> type:
    """The least signed integer type holding -1 .. bound - 1: a combine's choices (its k and each
    term's slot) are most of what FT holds at once (on 16,384 GPUs, gigabytes as int64)."""
    return np.int16 if bound <= 1 << 15 else np.int32 if bound <= 1 << 31 else np.int64


def _unravelled(columns: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """np.unravel_index of `columns`, unravelled flat: on an [N, 1] array of more than 8,192
    entries NumPy 2.4 returns wrong coordinates past its iterator's buffer (numpy/numpy#31980),
    and a box of frontiers one wide is such an array."""
    flat = np.unravel_index(np.ascontiguousarray(columns).reshape(-1), shape)
    return tuple(c.reshape(columns.shape) for c in flat)


def _aligned(term: Term, box: tuple[tuple[int, int], ...], t: int, n_terms: int):
    """The term's arrays on axes [o_0.., k, w_0, .., w_{T-1}] restricted to `box`, broadcastable."""
    select: list[Any] = []
    kept: list[Any] = []
    for entry in term.spec:
        if entry == "k":
            select.append(slice(None))
            kept.append("k")
        elif isinstance(entry, tuple):
            lo, hi = box[entry[1]]
            select.append(slice(lo, hi))
            kept.append(entry)
        else:
            select.append(int(entry))
    mem, time = term.table.mem[tuple(select)], term.table.time[tuple(select)]
    target = [("o", i) for i in range(len(box))] + ["k"]
    perm = [kept.index(a) for a in target if a in kept] + [len(kept)]
    mem, time = np.transpose(mem, perm), np.transpose(time, perm)
    present = iter(mem.shape[:-1])
    shape = [next(present) if a in kept else 1 for a in target]
    shape += [mem.shape[-1] if i == t else 1 for i in range(n_terms)]
    return mem.reshape(shape), time.reshape(shape)


def _pad(a: np.ndarray, width: int, fill: float) -> np.ndarray:
    if a.shape[-1] == width:
        return a
    pad = np.full(a.shape[:-1] + (width - a.shape[-1],), fill, dtype=a.dtype)
    return np.concatenate([a, pad], axis=-1)


def unroll_all(table: Table, index: tuple[int, ...], slots: Sequence[int]
               ) -> list[tuple[dict[int, int], dict[int, int]]]:
    """Per slot of `slots`: the configuration of every node and the option of every edge behind that
    slot of `table` at `index` (node -> k, edge -> r). Each (table, index, slot) the slots reach is
    expanded once for all of them: tables are visited parents first (a reverse postorder of the
    table graph), so every slot that reaches one has arrived before it is expanded. A frontier's
    points share most of their choices (they part at a few nodes), so this expands a fraction of
    what unrolling each point alone does (tests/search/test_tables.py compares the two)."""
    found: list[tuple[dict[int, int], dict[int, int]]] = [({}, {}) for _ in slots]
    pending: dict[int, dict[tuple[tuple[int, ...], int], list[int]]] = {id(table): {}}
    for p, slot in enumerate(slots):
        pending[id(table)].setdefault((index, slot), []).append(p)
    for current in _parents_first(table):
        entries = pending.pop(id(current), None)
        if not entries:
            continue
        if type(current) is Combined:
            _expand_combined(current, entries, found, pending)
            continue
        for (idx, s), points in entries.items():
            for item in current.expand(idx, s):
                if item[0] in ("node", "option"):
                    facts = 0 if item[0] == "node" else 1      # found[p] is (nodes, options)
                    for p in points:
                        found[p][facts][item[1]] = int(item[2])
                else:
                    child, child_index, child_slot = item
                    pending.setdefault(id(child), {}).setdefault((child_index, child_slot), []).extend(points)
    return found


def _expand_combined(table: Combined, entries: dict, found: list, pending: dict) -> None:
    """unroll_all's step for a Combined table's pending (index, slot)s, as `Combined.expand`
    yields them, without a generator per entry (most of what a decoder's points unroll through)."""
    k_choice, node = table.k_choice, table.node
    children = [(pending.setdefault(id(term.table), {}), _index_maker(term.spec), slots)
                for term, slots in zip(table.terms, table.slots)]
    for (idx, s), points in entries.items():
        at = idx + (s,)
        k = int(k_choice[at])
        if node is not None:
            for p in points:
                found[p][0][node] = k
        for fact in table.fixed:
            facts = 0 if fact[0] == "node" else 1
            for p in points:
                found[p][facts][fact[1]] = int(fact[2])
        for child_pending, index_of, slots in children:
            key = (index_of(idx, k), int(slots[at]))
            known = child_pending.get(key)
            if known is None:
                child_pending[key] = list(points)
            else:
                known.extend(points)


def _index_maker(spec: IndexSpec):
    """(index, k) -> the term's index, as `_resolve` reads `spec` entry by entry (the specs FT's
    eliminations use written out; any other entry by entry)."""
    codes = tuple("k" if e == "k" else e[1] if isinstance(e, tuple) else ("fixed", int(e)) for e in spec)
    if codes == ():
        return lambda index, k: ()
    if codes == ("k",):
        return lambda index, k: (k,)
    if codes == (0,):
        return lambda index, k: (index[0],)
    if codes == (0, 1):
        return lambda index, k: (index[0], index[1])
    if codes == (0, "k"):
        return lambda index, k: (index[0], k)
    if codes == ("k", 0):
        return lambda index, k: (k, index[0])
    if codes == ("k", 1):
        return lambda index, k: (k, index[1])
    if len(codes) == 2 and codes[0] == 0 and isinstance(codes[1], tuple):
        fixed = codes[1][1]
        return lambda index, k: (index[0], fixed)
    return lambda index, k: tuple(_resolve(e, index, k) for e in spec)


def _parents_first(root: Table) -> list[Table]:
    """The tables reachable from `root`, each after every table that yields it (reverse postorder)."""
    order: list[Table] = []
    seen = {id(root)}
    stack: list[tuple[Table, Iterator[Table]]] = [(root, iter(root.children()))]
    while stack:
        current, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            order.append(current)
        elif id(child) not in seen:
            seen.add(id(child))
            stack.append((child, iter(child.children())))
    return order[::-1]
