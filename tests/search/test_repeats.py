"""Repeated structure (search.repeats): groups with one signature get one set of tables, and
those tables equal the ones built group by group, on the zoo models' tiny variants, with
weights held sharded and with blocks recomputed, and on a full-size decoder."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from stratagem import zoo
from stratagem.search import space as space_module
from stratagem.search.context import context, recomputing
from stratagem.search.repeats import twins
from stratagem.search.space import FT_SPACE, build_search_space

# every zoo model's tiny variant, one per family of sizes (wresnet-D-W and rnn-L-H share their
# tiny variants' architecture with wideresnet and rnn-10-8k)
TINY = tuple(f"{name}-tiny" for name in zoo.names()
             if not name.startswith("wresnet-") and not (name.startswith("rnn-") and name != "rnn-10-8k"))


def _graph(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zoo.build(name)


def _tables(model, options, monkeypatch, reuse: bool):
    with monkeypatch.context() as patch:
        if not reuse:
            patch.setattr(space_module, "twins", lambda model, groups, *_: tuple(range(len(groups))))
        space = build_search_space(model, options)
    problem = space.problem
    return (problem.node_mem, problem.node_time, problem.node_transient,
            [(e.src, e.dst, e.mem, e.time, e.transient) for e in problem.edges], space.levels,
            space.configs, space.members)


def _assert_equal(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_equal(x, y)
    elif dataclasses.is_dataclass(a):
        assert type(a) is type(b)
        for f in dataclasses.fields(a):
            _assert_equal(getattr(a, f.name), getattr(b, f.name))
    else:
        assert a == b


def _check(model, options, monkeypatch) -> int:
    _assert_equal(_tables(model, options, monkeypatch, True), _tables(model, options, monkeypatch, False))
    space = build_search_space(model, options)
    found = twins(model, space.groups, space.configs, space.flags)
    return sum(t != g for g, t in enumerate(found))


@pytest.mark.parametrize("name", TINY)
def test_twins_tables_equal_tables_built_group_by_group(name, monkeypatch):
    ctx = context(_graph(name), "a100-1x8", 4)
    _check(ctx.model, FT_SPACE, monkeypatch)


@pytest.mark.parametrize("name", ["gpt-7b-tiny", "hf:llama-7b-tiny", "transformer-tiny", "rnn-10-8k-tiny"])
def test_twins_with_sharded_states_and_recomputed_blocks(name, monkeypatch):
    ctx = context(_graph(name), "a100-1x8", 4)
    sharded = dataclasses.replace(FT_SPACE, state_sharding=True)
    _check(ctx.model, sharded, monkeypatch)
    _check(recomputing(ctx).model, sharded, monkeypatch)


def test_a_decoder_stack_is_priced_once_per_distinct_block(monkeypatch):
    """gpt-125m's 12 blocks: every group of blocks 2-11 is a twin of block 1's (the first and last
    read the embedding and feed the head), and the tables still equal the ones built one by one."""
    ctx = context(_graph("gpt-125m"), "a100-1x8", 8)
    reused = _check(ctx.model, FT_SPACE, monkeypatch)
    space = build_search_space(ctx.model, FT_SPACE)
    graph = ctx.model.graph
    per_block = sum(graph.op(group.anchor).module.startswith("layers.1.") for group in space.groups)
    assert per_block > 0 and reused >= 9 * per_block
