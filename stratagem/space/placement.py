"""Placements, as in PyTorch DTensor: tiny frozen values that print as S(0), R, P(sum)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from stratagem.errors import ConfigError


@dataclass(frozen=True)
class Shard:
    dim: int

    def __str__(self) -> str:
        return f"S({self.dim})"


@dataclass(frozen=True)
class Replicate:
    def __str__(self) -> str:
        return "R"


@dataclass(frozen=True)
class Partial:
    reduce_op: str = "sum"

    def __str__(self) -> str:
        return f"P({self.reduce_op})"


Placement = Shard | Replicate | Partial
REPLICATE = Replicate()

_PATTERN = re.compile(r"^\s*(?:S\((\d+)\)|R|P\((sum|max|min|prod|avg)\))\s*$")


def parse_placement(text: str) -> Placement:
    match = _PATTERN.match(text)
    if not match:
        raise ConfigError("unreadable placement", expected="S(<dim>), R or P(sum|max|min|prod)",
                          got=repr(text))
    if text.strip() == "R":
        return REPLICATE
    if match.group(1) is not None:
        return Shard(int(match.group(1)))
    return Partial(match.group(2))


def format_placements(placements: tuple[Placement, ...]) -> str:
    return "(" + ", ".join(str(p) for p in placements) + ")"


def gradient_placement(forward: Placement, axis_splits_something: bool) -> Placement:
    """Placement of a gradient, given its tensor's forward placement on one mesh axis.

    S(d) stays S(d). A tensor replicated on an axis whose devices compute different parts of the
    op gets partial gradients, P(sum); on an axis where they compute the same thing (replicated
    compute) every device holds the whole gradient, R. A P(sum) output needs its gradient whole, R.
    """
    if isinstance(forward, Shard):
        return forward
    if isinstance(forward, Partial):
        return REPLICATE
    return Partial("sum") if axis_splits_something else REPLICATE
