"""Pricing MCMC's proposals (FlexFlow §5.3 and Table 5): delta against full simulation.

Both keep the chain's current assignment and answer `propose(index, choice)` with the
(iteration time, peak memory) of the assignment with one variable changed; `commit` keeps the
change, `revert` undoes it, `move` goes to a neighbour whose cost is already known.

    DeltaEvaluator  one `Simulation` kept in step with the chain; a proposal is a delta
                    simulation of the ops it changes (`Simulation.change_many`), and a rejected
                    one another delta back
    FullEvaluator   every proposal simulated from scratch (FlexFlow's full simulation)
"""

from __future__ import annotations

from collections.abc import Sequence

from stratagem.search.choices import ChoiceSpace
from stratagem.sim.builder import Simulation


class DeltaEvaluator:
    """One simulation kept in step with the chain; a rejected proposal is undone by delta too."""

    def __init__(self, model, space: ChoiceSpace, assignment: Sequence[int]):
        self.space, self.assignment = space, list(assignment)
        self.sim = Simulation(model, space.strategy(assignment))
        self.sim.run()
        self._undo: tuple[int, int] | None = None

    def current(self) -> tuple[float, float]:
        return self.sim.summary()

    def propose(self, index: int, choice: int) -> tuple[float, float]:
        self._undo = (index, self.assignment[index])
        self.assignment[index] = choice
        return self.sim.change_many(self.space.changes(index, choice))

    def commit(self) -> None:
        self._undo = None

    def revert(self) -> None:
        index, choice = self._undo
        self.assignment[index] = choice
        self.sim.change_many(self.space.changes(index, choice))
        self._undo = None

    def move(self, index: int, choice: int, known: tuple[float, float]) -> None:
        """Go to a neighbour whose cost is already known."""
        self.assignment[index] = choice
        self.sim.change_many(self.space.changes(index, choice))


class FullEvaluator:
    """Every proposal simulated from scratch (FlexFlow's full simulation, Table 5)."""

    def __init__(self, model, space: ChoiceSpace, assignment: Sequence[int]):
        self.model, self.space, self.assignment = model, space, list(assignment)
        self._undo: tuple[int, int] | None = None
        self._current = self._proposed = self._simulate()

    def _simulate(self) -> tuple[float, float]:
        sim = Simulation(self.model, self.space.strategy(self.assignment))
        sim.store.simulate()
        return sim.summary()

    def current(self) -> tuple[float, float]:
        return self._current

    def propose(self, index: int, choice: int) -> tuple[float, float]:
        self._undo = (index, self.assignment[index])
        self.assignment[index] = choice
        self._proposed = self._simulate()
        return self._proposed

    def commit(self) -> None:
        self._current, self._undo = self._proposed, None

    def revert(self) -> None:
        index, choice = self._undo
        self.assignment[index] = choice
        self._undo = None

    def move(self, index: int, choice: int, known: tuple[float, float]) -> None:
        self.assignment[index] = choice
        self._current = known


EVALUATORS = {"delta": DeltaEvaluator, "full": FullEvaluator}


__all__ = ["EVALUATORS", "DeltaEvaluator", "FullEvaluator"]
