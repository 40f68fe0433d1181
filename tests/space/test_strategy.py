"""The Strategy value: a per-op mapping with the plan's other decisions beside it, refused when it
misses or invents an op or names an edge the graph lacks."""

from __future__ import annotations

import pickle

import pytest

from stratagem.errors import ConfigError
from stratagem.space import Configuration, Edge, Level, Pipeline, Strategy, as_strategy, check_reuse, reuse_of

BATCH2 = Configuration((Level("b", 2),), 0)
WHOLE = Configuration((Level(None, 1),), 0)


def test_a_strategy_reads_as_its_per_op_mapping():
    strategy = Strategy({"a": BATCH2, "b": WHOLE}, {("x", "a", "b"): "keep_after"})
    assert strategy["a"] == BATCH2 and list(strategy) == ["a", "b"] and len(strategy) == 2
    assert dict(strategy.items()) == {"a": BATCH2, "b": WHOLE}
    assert strategy.reuse == {Edge("x", "a", "b"): "keep_after"}


def test_a_strategy_is_immutable_and_with_ops_makes_another():
    strategy = Strategy({"a": BATCH2, "b": WHOLE})
    with pytest.raises(TypeError):
        strategy.ops["a"] = WHOLE
    changed = strategy.with_ops({"a": WHOLE})
    assert changed["a"] == WHOLE and strategy["a"] == BATCH2


def test_equality_counts_reuse_choices():
    plain = Strategy({"a": BATCH2})
    assert plain == {"a": BATCH2} and plain == Strategy({"a": BATCH2})
    with_reuse = Strategy({"a": BATCH2}, {Edge("x", None, "a"): "keep_before"})
    assert with_reuse != plain and with_reuse != {"a": BATCH2}


def test_as_strategy_and_reuse_of_take_a_plain_mapping_too():
    strategy = Strategy({"a": BATCH2}, {Edge("x", None, "a"): "keep_before"})
    assert as_strategy(strategy) is strategy and reuse_of(strategy) == strategy.reuse
    assert as_strategy({"a": BATCH2}) == Strategy({"a": BATCH2}) and reuse_of({"a": BATCH2}) == {}


def test_a_strategy_pickles_whole_as_plans_sent_between_processes_are():
    strategy = Strategy({"a": BATCH2, "b": WHOLE}, {("x", "a", "b"): "keep_after"}, Pipeline(("b",), 4, "gpipe"))
    back = pickle.loads(pickle.dumps(strategy))
    assert back == strategy and back.reuse == strategy.reuse and back.pipeline == strategy.pipeline
    assert back != Strategy({"a": BATCH2, "b": WHOLE}, {("x", "a", "b"): "keep_after"})
    with pytest.raises(TypeError):
        back.ops["a"] = WHOLE


@pytest.mark.parametrize("edge", [Edge("x", "a", "b"), Edge("h.0:out", None, "fc")])
def test_edge_names_round_trip(edge):
    assert Edge.parse(str(edge)) == edge


@pytest.mark.parametrize("text", ["nonsense", "x:a", ":a->b", "x:a->"])
def test_a_malformed_edge_name_says_what_is_expected(text):
    with pytest.raises(ConfigError, match="tensor:source op->consumer op"):
        Edge.parse(text)


def test_reuse_for_an_edge_not_in_the_graph_is_refused():
    edges = (Edge("x", None, "a"), Edge("h", "a", "b"))
    check_reuse(edges, {Edge("h", "a", "b"): "keep_after"})
    with pytest.raises(ConfigError, match="edges the graph does not have"):
        check_reuse(edges, {Edge("h", "b", "a"): "keep_after"})
