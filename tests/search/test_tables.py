"""Frontier tables (search.tables): keys equal exactly for equal arrays, which is what lets the memo
reuse a repeated layer's reductions; unrolling every point at once gives what unrolling each alone
does (FT itself: test_ft.py)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stratagem.frontend import zoo
from stratagem.search import ft
from stratagem.search.context import context
from stratagem.search.ft import FTOptions
from stratagem.search.space import build_search_space
from stratagem.search.tables import Memo, _index_dtype, _index_maker, _resolve, content_key, edge_options, unroll_all
from tests.search.test_ft import problems


def test_content_key_is_equal_for_equal_arrays_only():
    rng = np.random.default_rng(0)
    mem, time = rng.random((2, 3, 4)), rng.random((2, 3, 4))
    key = content_key(mem, time)
    assert content_key(mem.copy(), time.copy()) == key
    assert content_key(np.asfortranarray(mem), time) == key            # a layout is not a content
    assert content_key(mem.transpose(0, 2, 1).copy().transpose(0, 2, 1), time) == key
    changed = mem.copy()
    changed[1, 2, 3] = np.nextafter(changed[1, 2, 3], 2.0)
    assert content_key(changed, time) != key
    assert content_key(time, mem) != key                                # which array is which
    assert content_key(mem.reshape(2, 4, 3), time.reshape(2, 4, 3)) != key   # same bytes, another shape
    assert content_key(mem.astype(np.float32), time.astype(np.float32)) != key
    ints = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    assert content_key(ints, ints) != content_key(ints.view(np.float64), ints.view(np.float64))


def test_memo_finds_an_edges_options_by_its_arrays_and_else_by_content():
    """The same arrays asked again: the options found before; other arrays of equal content: equal
    options; of other content: their own (the memo holds the arrays it knows by identity, so an
    identity is never another array's)."""
    rng = np.random.default_rng(1)
    mem, time = rng.random((2, 3, 4)), rng.random((2, 3, 4))
    memo = Memo()
    first = memo.edge_options(mem, time)
    assert memo.edge_options(mem, time) is first
    assert memo.edge_options(mem.copy(), time.copy()) is first
    changed = mem + 1.0
    for got, want in zip(memo.edge_options(changed, time), edge_options(changed, time)):
        np.testing.assert_array_equal(got, want)
    assert not np.array_equal(memo.edge_options(changed, time)[0], first[0])


def test_a_terms_index_is_made_as_its_spec_reads_entry_by_entry():
    """unroll_all's written-out index makers against _resolve, for every spec FT's eliminations
    use and others (fixed configurations at either place, a second output dim first)."""
    o0, o1 = ("o", 0), ("o", 1)
    specs = [(), ("k",), (o0,), (o1,), (o0, o1), (o1, o0), (o0, "k"), ("k", o0), ("k", o1), (o0, 3), (3, o0),
             (4,), ("k", 2), (o1, "k"), (o0, o1, "k")]
    for spec in specs:
        make = _index_maker(spec)
        for index in [(0, 1), (2, 0), (5, 7)]:
            for k in (0, 3):
                assert make(index, k) == tuple(_resolve(e, index, k) for e in spec), spec


def _unrolled_alone(table, index, slot):
    """The oracle: one slot's facts by a plain depth-first walk of `expand`."""
    nodes, options, stack = {}, {}, [(table, index, slot)]
    while stack:
        current, idx, s = stack.pop()
        for item in current.expand(idx, s):
            if item[0] == "node":
                nodes[item[1]] = int(item[2])
            elif item[0] == "option":
                options[item[1]] = int(item[2])
            else:
                stack.append(item)
    return nodes, options


@settings(max_examples=60, deadline=None)
@given(problems(max_nodes=8, max_configs=4), st.sampled_from([None, 2]))
def test_unrolling_every_slot_together_gives_each_slot_alone(problem, max_width):
    """FT's last table on random problems (branch and heuristic eliminations included, thinned or
    not): every slot's nodes and options are the plain walk's."""
    table = _last_table(problem, FTOptions(workers=1, max_width=max_width, branch_limit=4))
    slots = [s for s in range(table.width) if np.isfinite(table.mem[s])]
    assert unroll_all(table, (), slots) == [_unrolled_alone(table, (), s) for s in slots]


def test_unrolling_a_real_frontier_gives_each_slot_alone():
    """gpt-tiny's space at 8 devices: hubs fixed, chains folded, repeated blocks reused."""
    space = build_search_space(context(zoo.build("gpt-tiny"), "a100-1x8", 8).model)
    table = _last_table(space.problem, FTOptions(workers=1, max_width=16, hub_span=24))
    slots = [s for s in range(table.width) if np.isfinite(table.mem[s])]
    assert len(slots) > 1
    assert unroll_all(table, (), slots) == [_unrolled_alone(table, (), s) for s in slots]


def _last_table(problem, options):
    """The table FT unrolls its points from (search.ft.frontier_tracking's `state.final()`)."""
    captured = []
    original = ft.unroll_all

    def capturing(table, index, slots):
        captured.append(table)
        return original(table, index, slots)

    ft.unroll_all = capturing
    try:
        ft.frontier_tracking(problem, options)
    finally:
        ft.unroll_all = original
    return captured[-1]


@pytest.mark.parametrize("bound", [1, 2, 1 << 15, (1 << 15) + 1, 1 << 31, (1 << 31) + 1])
def test_choices_are_held_in_the_least_integer_type_that_holds_them(bound):
    """-1 (no choice) and bound - 1 fit; no smaller of int16, int32, int64 would hold bound - 1."""
    chosen = np.dtype(_index_dtype(bound))
    assert np.iinfo(chosen).min <= -1 and np.iinfo(chosen).max >= bound - 1
    smaller = [d for d in (np.int16, np.int32, np.int64) if np.dtype(d).itemsize < chosen.itemsize]
    assert all(np.iinfo(d).max < bound - 1 for d in smaller)
