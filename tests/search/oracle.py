"""Plain enumeration: every strategy of a small ChoiceSpace, fully simulated (the test oracle)."""

from __future__ import annotations

import itertools

from stratagem.search.choices import ChoiceSpace
from stratagem.search.ft import FTOptions
from stratagem.search.ft_peak import peak_frontier_tracking
from stratagem.sim.builder import Simulation, simulate


def enumerate_times(model, space: ChoiceSpace) -> dict[tuple[int, ...], tuple[float, float]]:
    """(iteration time, peak memory) of every assignment, each from a fresh full simulation."""
    out = {}
    for assignment in itertools.product(*(range(v.num_choices) for v in space.variables)):
        result = Simulation(model, space.strategy(assignment)).run()
        out[assignment] = (result.iteration_time_s, result.peak_memory_bytes)
    return out


def best_time(times: dict, cap_bytes: float = float("inf")) -> float:
    return min(t for t, peak in times.values() if peak <= cap_bytes)


def build_uncapped_space(model, **kwargs):
    """build_search_space with digits enough for every distinct transient triple (search.levels):
    FT's problem is then exact, which the exactness tests check; the default caps trade that for
    speed (overcharging, tested in tests/search/test_levels.py)."""
    import pytest

    import stratagem.search.levels as levels
    from stratagem.search.space import build_search_space
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(levels, "MAX_LEVELS", 64)
        patch.setattr(levels, "MAX_LEVELS_PER_GROUP", 64)
        return build_search_space(model, **kwargs)


def assert_leaner_as_simulated(model, space, baseline_space, chosen) -> None:
    """FT's leanest point over `space` takes a state `chosen` accepts (a configuration predicate),
    needs less memory than the leanest over `baseline_space`, and the simulator agrees."""
    lean_base = peak_frontier_tracking(baseline_space.problem, FTOptions(workers=1)).points[0]
    lean = peak_frontier_tracking(space.problem, FTOptions(workers=1)).points[0]
    strategy, _ = space.strategy(lean.assignment, lean.options)
    assert any(chosen(c) for c in strategy.values())
    assert lean.mem < lean_base.mem
    assert simulate(model, strategy).peak_memory_bytes < \
        simulate(model, baseline_space.strategy(lean_base.assignment)[0]).peak_memory_bytes


def assert_ft_finds_the_exact_frontier(model, space, bases) -> None:
    """FT's peak frontier of `space` equals the frontier of the cost model's exact (memory, time)
    over every strategy (`bases`: problem assignments, one per strategy)."""
    import pytest

    from stratagem.search.ft import FTOptions
    from stratagem.search.ft_peak import peak_frontier_tracking
    from stratagem.search.space import additive_cost
    truth, best = [], float("inf")
    for mem, time in sorted(additive_cost(model, space.strategy(base)[0]) for base in bases):
        if time < best * (1 - 1e-12):
            truth.append((mem, time))
            best = time
    found = peak_frontier_tracking(space.problem, FTOptions(workers=1)).pairs
    assert len(found) == len(truth)
    for (m, t), (em, et) in zip(found, truth):
        assert m == pytest.approx(em, rel=1e-12) and t == pytest.approx(et, rel=1e-12)


def space_assignments(space):
    """Every strategy of a search space (small enough to enumerate) as a problem assignment with
    its flags and levels cleared, and each group's indices over its flag and level values."""
    for base in itertools.product(*[range(len(c)) for c in space.configs]):
        flagged = [[k * space.num_flags(g) + f for f in range(space.num_flags(g))] for g, k in enumerate(base)]
        yield [values[0] for values in flagged], flagged


def checked_strategies(model, space):
    """Every strategy of `space`, each checked: the least over its flag and level values of the
    problem's memory is the cost model's exact peak, and every value's time is its time (flags and
    levels change memory only). Yields (strategy, the memories over those values)."""
    import pytest

    from stratagem.search.space import additive_cost
    for base, flagged in space_assignments(space):
        strategy, _ = space.strategy(base)
        exact = additive_cost(model, strategy)
        values = [space.problem.evaluate(a) for a in itertools.product(*flagged)]
        assert min(m for m, _ in values) == pytest.approx(exact[0], rel=1e-12)
        assert all(t == pytest.approx(exact[1], rel=1e-12) for _, t in values)
        yield strategy, [m for m, _ in values]


def bounded_strategies(model, space):
    """Every strategy of `space`, checked never undercharged: the least over its flag and level
    values of the problem's memory is at least the cost model's exact peak. Yields (strategy,
    that least, the exact peak)."""
    from stratagem.search.space import additive_cost
    for base, flagged in space_assignments(space):
        strategy, _ = space.strategy(base)
        exact = additive_cost(model, strategy)[0]
        least = min(space.problem.evaluate(a)[0] for a in itertools.product(*flagged))
        assert least >= exact * (1 - 1e-12)
        yield strategy, least, exact
