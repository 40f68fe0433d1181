"""Plain enumeration: every strategy of a small ChoiceSpace, fully simulated (the test oracle)."""

from __future__ import annotations

import itertools

from stratagem.search.choices import ChoiceSpace
from stratagem.sim.builder import Simulation


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
