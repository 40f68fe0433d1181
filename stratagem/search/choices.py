"""The space MCMC and exhaustive search walk: variables, each picking one of its choices.

    op space      one variable per op; its choices are `model.configurations(op, options)`:
                  with the default SpaceOptions, FlexFlow's whole SOAP space, sub-blocks of
                  devices (operator parallelism) included                          `op_space`
    group space   one variable per coarsened group (Tofu §5.1, `search.coarsen`); a choice sets
                  the anchor's configuration and every follower's derived one (partial sums
                  all-reduced, or also reduce-scattered with SpaceOptions.scatter_partial_sums:
                  `search.space.group_variants`)                                  `group_space`

A strategy is an assignment (one choice index per variable); `ChoiceSpace.strategy` turns it
into a configuration per op, `ChoiceSpace.changes` gives the ops one variable's choice sets (what
a proposal hands to `Simulation.change_many`), and `ChoiceSpace.project` maps any strategy to the
nearest assignment (exact where the strategy lies in the space).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stratagem.errors import ConfigError
from stratagem.search.coarsen import Group, coarsen
from stratagem.search.space import group_variants
from stratagem.space import Configuration, SpaceOptions


@dataclass(frozen=True)
class Variable:
    name: str                                            # the op (or group anchor) it stands for
    ops: tuple[str, ...]                                 # ops whose configuration it sets
    choices: tuple[tuple[Configuration, ...], ...]       # per choice: a configuration per op

    @property
    def num_choices(self) -> int:
        return len(self.choices)


@dataclass(frozen=True)
class ChoiceSpace:
    variables: tuple[Variable, ...]
    description: str = ""

    def __post_init__(self) -> None:
        empty = [v.name for v in self.variables if not v.choices]
        if empty:
            raise ConfigError("the space leaves ops without a configuration",
                              expected="at least one configuration per op",
                              got=f"none for {empty[:5]} ({self.description})",
                              hint="Allow replication or fewer devices in the SpaceOptions")

    @property
    def size(self) -> float:
        """Number of strategies (a float; inf beyond 1e308, see `size_text`)."""
        return math.prod(float(v.num_choices) for v in self.variables)

    @property
    def size_text(self) -> str:
        log10 = sum(math.log10(v.num_choices) for v in self.variables)
        return f"{self.size:.3g}" if log10 < 300 else f"1e{log10:.0f}"

    def strategy(self, assignment: Sequence[int]) -> dict[str, Configuration]:
        out: dict[str, Configuration] = {}
        for variable, choice in zip(self.variables, assignment):
            out.update(zip(variable.ops, variable.choices[choice]))
        return out

    def changes(self, index: int, choice: int) -> dict[str, Configuration]:
        variable = self.variables[index]
        return dict(zip(variable.ops, variable.choices[choice]))

    def project(self, strategy: Mapping[str, Configuration]) -> tuple[int, ...]:
        """Per variable: the choice equal to the strategy's configurations, else the first whose
        anchor configuration matches, else choice 0."""
        return tuple(_nearest(v, strategy) for v in self.variables)

    def contains(self, strategy: Mapping[str, Configuration]) -> bool:
        return self.strategy(self.project(strategy)) == {op: strategy[op] for v in self.variables
                                                         for op in v.ops}


def _nearest(variable: Variable, strategy: Mapping[str, Configuration]) -> int:
    wanted = tuple(strategy[op] for op in variable.ops)
    anchor_match = None
    for k, choice in enumerate(variable.choices):
        if choice == wanted:
            return k
        if anchor_match is None and choice[0] == wanted[0]:
            anchor_match = k
    return anchor_match if anchor_match is not None else 0


def op_space(model, options: SpaceOptions = SpaceOptions()) -> ChoiceSpace:
    variables = tuple(Variable(op.name, (op.name,), tuple((c,) for c in model.configurations(op.name, options)))
                      for op in model.graph.ops)
    return ChoiceSpace(variables, f"every op, {_describe(options)}")


def group_space(model, options: SpaceOptions = SpaceOptions(), groups: tuple[Group, ...] | None = None
                ) -> ChoiceSpace:
    groups = groups or coarsen(model.graph, model.analyses)
    variables = []
    for group in groups:
        configs, members = group_variants(model, group, model.configurations(group.anchor, options),
                                          options.scatter_partial_sums)
        choices = tuple(tuple(members[op][k] for op in group.members) for k in range(len(configs)))
        variables.append(Variable(group.anchor, group.members, choices))
    return ChoiceSpace(tuple(variables), f"coarsened groups, {_describe(options)}")


def _describe(options: SpaceOptions) -> str:
    return (f"max_axes={options.max_axes}, fewer devices={options.allow_fewer_devices}, "
            f"replicate={options.allow_replicate}, reduction={options.allow_reduction}")


__all__ = ["ChoiceSpace", "Variable", "group_space", "op_space"]
