"""Pricing MCMC's proposals (FlexFlow §5.3 and Table 5): delta against full simulation.

Both keep the chain's current assignment and answer `propose(index, choice)` with the
(iteration time, peak memory) of the assignment with one variable changed; `commit` keeps the
change, `revert` undoes it, `move` goes to a neighbour whose cost is already known.

    "delta"         `DeltaEvaluator(retime="delta")`: one `Simulation` kept in step with the chain;
                    a proposal rebuilds the tasks of the ops it changes and re-times the graph by
                    Algorithm 2, replaying only the timeline after the first edit (the default:
                    FlexFlow's delta simulation)
    "incremental"   `DeltaEvaluator(retime="full")`: the same edits, re-timed by Algorithm 1 over
                    the whole edited graph
    "full"          `FullEvaluator`: every proposal simulated from scratch (FlexFlow's full
                    simulation, Table 5's baseline)
"""

from __future__ import annotations

from collections.abc import Sequence

from stratagem.search.choices import ChoiceSpace
from stratagem.sim.builder import Simulation

REBUILD_EVERY = 512        # edits between checks for a store mostly made of dead slots


class DeltaEvaluator:
    """One simulation kept in step with the chain: a proposal edits only the tasks of the ops it
    changes (FlexFlow §5.3's task-graph update) and re-times the graph, by Algorithm 2 from the
    previous timeline (retime="delta") or by Algorithm 1 over the edited graph ("full": the
    same timeline). A rejected
    proposal, or a move to a strategy whose cost is known, only edits the graph back: the next
    proposal's re-timing covers it. The task store keeps dead slots; the simulation is rebuilt
    from the current strategy when they dominate."""

    def __init__(self, model, space: ChoiceSpace, assignment: Sequence[int], retime: str = "delta"):
        self.model, self.space, self.assignment, self.retime = model, space, list(assignment), retime
        self._undo: tuple[int, int] | None = None
        self._rebuild()

    def _rebuild(self) -> None:
        self.sim = Simulation(self.model, self.space.strategy(self.assignment))
        self.sim.run()
        self._edits = 0

    def current(self) -> tuple[float, float]:
        return self.sim.summary()

    def _edit(self, index: int, choice: int) -> None:
        self.assignment[index] = choice
        for op, config in self.space.changes(index, choice).items():
            self.sim.edit(op, config)
        self._edits += 1

    def propose(self, index: int, choice: int) -> tuple[float, float]:
        self._undo = (index, self.assignment[index])
        self._edit(index, choice)
        if self._edits >= REBUILD_EVERY and self.sim.store.n > 4 * int(self.sim.store.alive[:self.sim.store.n].sum()):
            self._rebuild()
            return self.sim.summary()
        return self.sim.change_many({}, retime=self.retime)

    def commit(self) -> None:
        self._undo = None

    def revert(self) -> None:
        index, choice = self._undo
        self._edit(index, choice)
        self._undo = None

    def move(self, index: int, choice: int, known: tuple[float, float]) -> None:
        """Go to a neighbour whose cost is already known."""
        self._edit(index, choice)


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


EVALUATORS = {"incremental": lambda model, space, a: DeltaEvaluator(model, space, a, retime="full"),
              "delta": lambda model, space, a: DeltaEvaluator(model, space, a, retime="delta"),
              "full": FullEvaluator}


__all__ = ["EVALUATORS", "DeltaEvaluator", "FullEvaluator"]
