"""Property tests of index arithmetic: interval bounds, simplification, range refinement."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from stratagem.tdl.indexing import Affine, IndexCond, IndexVar, bounds, evaluate, simplify
from stratagem.tdl.regions import refine

VARS = 3


@st.composite
def ranges(draw, count=VARS):
    found = []
    for _ in range(count):
        lo = draw(st.integers(-4, 4))
        found.append((lo, lo + draw(st.integers(0, 5))))
    return found


@st.composite
def affine(draw, variables):
    expr = Affine((), draw(st.integers(-6, 6)))
    for v in variables:
        expr = expr + v * draw(st.integers(-3, 3))
    return expr


@st.composite
def index_expr(draw, variables, depth=2):
    """Affine combinations of variables and of // and % of such combinations."""
    expr = draw(affine(variables))
    if depth and draw(st.booleans()):
        inner = draw(index_expr(variables, depth - 1))
        k = draw(st.integers(1, 5))
        expr = expr + (inner // k if draw(st.booleans()) else inner % k) * draw(st.integers(-2, 2))
    return expr


def points(variables, rng):
    for values in itertools.product(*(range(lo, hi + 1) for lo, hi in rng)):
        yield {v.uid: x for v, x in zip(variables, values)}


def setup(draw_ranges):
    variables = [IndexVar(f"v{i}") for i in range(VARS)]
    return variables, {v.uid: r for v, r in zip(variables, draw_ranges)}


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_bounds_contain_every_value_and_are_tight_for_affine(data):
    variables, rng = setup(data.draw(ranges()))
    expr = data.draw(index_expr(variables))
    lo, hi = bounds(expr, rng)
    values = [evaluate(expr, p) for p in points(variables, list(rng.values()))]
    assert lo <= min(values) and max(values) <= hi
    plain = data.draw(affine(variables))
    plain_values = [evaluate(plain, p) for p in points(variables, list(rng.values()))]
    assert bounds(plain, rng) == (min(plain_values), max(plain_values))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_simplify_keeps_every_value_and_removes_what_the_ranges_make_affine(data):
    variables, rng = setup(data.draw(ranges()))
    expr = data.draw(index_expr(variables))
    simple = simplify(expr, rng)
    for p in points(variables, list(rng.values())):
        assert evaluate(simple, p) == evaluate(expr, p)


def test_simplify_undoes_a_row_major_split_of_dims():
    b, s = IndexVar("b"), IndexVar("s")
    rng = {b.uid: (0, 3), s.uid: (0, 11)}
    position = b * 12 + s
    assert repr(simplify(position // 12, rng)) == "b"
    assert repr(simplify(position % 12, rng)) == "s"
    assert repr(simplify((position // 4) % 3, rng)) == "(s) // 4"


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_refine_keeps_exactly_the_points_of_a_one_variable_condition(data):
    variables, rng = setup(data.draw(ranges(1)))
    v = variables[0]
    expr = v * data.draw(st.integers(-3, 3).filter(bool)) + data.draw(st.integers(-8, 8))
    cond = IndexCond(expr, data.draw(st.sampled_from(["<", "<=", ">", ">=", "=="])))
    holds = [p[v.uid] for p in points(variables, [rng[v.uid]]) if _holds(cond, p)]
    refined = refine(rng, cond)
    if not holds:
        assert refined is None
    else:
        assert refined is not None and refined[v.uid] == (min(holds), max(holds))
        assert holds == list(range(min(holds), max(holds) + 1))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_refine_keeps_every_point_of_a_several_variable_condition(data):
    variables, rng = setup(data.draw(ranges()))
    cond = IndexCond(data.draw(affine(variables)), data.draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="])))
    refined = refine(rng, cond)
    holding = [p for p in points(variables, list(rng.values())) if _holds(cond, p)]
    if refined is None:
        assert not holding
    for p in holding:
        assert all(refined[u][0] <= x <= refined[u][1] for u, x in p.items())


def test_refine_narrows_a_causal_condition_to_the_prefix():
    i, j = IndexVar("i"), IndexVar("j")
    refined = refine({i.uid: (0, 2), j.uid: (0, 7)}, j - i <= 0)
    assert refined[j.uid] == (0, 2) and refined[i.uid] == (0, 2)


def _holds(cond, point):
    value = evaluate(cond.expr, point)
    return {"<": value < 0, "<=": value <= 0, ">": value > 0, ">=": value >= 0,
            "==": value == 0, "!=": value != 0}[cond.relation]
