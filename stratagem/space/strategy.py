"""A strategy: everything a plan decides about how to train, as one typed value.

    Strategy(ops={op name: Configuration}, reuse={Edge: reuse option}, pipeline=None | Pipeline)

  ops    per op, its device block and mesh axes (FlexFlow's SOAP per op; TensorOpt's ε);
  reuse  per edge whose tensor is re-scheduled, how the copy is kept for backward (TensorOpt §3.3's
         tensor-reuse options); an edge not named takes its cost's default.
  pipeline  None (every op runs the whole batch in one step), or the stages, micro-batch count and
            schedule (space.pipeline); the graph is then one micro-batch's, and each op's
            configuration lies in its stage's device block.

It is a Mapping from op name to Configuration (its `ops`), so code that reads a configuration per op
reads a Strategy or a plain dict alike; `as_strategy` makes one of either. The cost model, the
simulator, the searches, plan files and the runtime all take it.

A new dimension of the decision (per-parameter sharding, per-block recomputation, pipeline stages)
is a new field here whose default is today's behaviour, its check in `check_strategy`, and its entry
in the plan file (stratagem.plan: the format version goes up and the older version is migrated).

`check_strategy` refuses a strategy that misses or invents an op, or names an edge the graph does
not have; the cost model, the simulator and plan files all call it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from stratagem.errors import ConfigError
from stratagem.space.config import Configuration
from stratagem.space.pipeline import Pipeline
from stratagem.values import closest


class Edge(NamedTuple):
    """An edge a strategy pays re-scheduling for (cost.model.CostModel.edges): its tensor, the op
    it comes from (the producer, a weight's owner, or None for a graph input from the data loader),
    the op that reads it. Written "tensor:src->dst" in plan files."""
    tensor: str
    src_op: str | None
    dst_op: str

    def __str__(self) -> str:
        return f"{self.tensor}:{self.src_op}->{self.dst_op}"

    @classmethod
    def parse(cls, text: str) -> "Edge":
        tensor, sep, ends = text.rpartition(":")
        src, arrow, dst = ends.partition("->")
        if not sep or not arrow or not tensor or not dst:
            raise ConfigError("edge name is malformed", expected='"tensor:source op->consumer op" '
                              '(source "None" for an input)', got=repr(text))
        return cls(tensor, None if src == "None" else src, dst)


@dataclass(frozen=True, eq=False)
class Strategy(Mapping):
    ops: Mapping[str, Configuration]
    reuse: Mapping[Edge, str] = field(default_factory=dict)
    pipeline: Pipeline | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", MappingProxyType(dict(self.ops)))
        object.__setattr__(self, "reuse", MappingProxyType({Edge(*k): v for k, v in self.reuse.items()}))

    def __getitem__(self, op: str) -> Configuration:
        return self.ops[op]

    def __iter__(self) -> Iterator[str]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Strategy):
            return (dict(self.ops) == dict(other.ops) and dict(self.reuse) == dict(other.reuse)
                    and self.pipeline == other.pipeline)
        return (isinstance(other, Mapping) and not self.reuse and self.pipeline is None
                and dict(self.ops) == dict(other))

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self):
        """Pickled as its three fields (a read-only view does not pickle): plans travel between
        processes (stratagem.forked)."""
        return Strategy, (dict(self.ops), dict(self.reuse), self.pipeline)

    def with_ops(self, changes: Mapping[str, Configuration]) -> "Strategy":
        """This strategy with some ops' configurations replaced."""
        return Strategy({**self.ops, **changes}, self.reuse, self.pipeline)


def as_strategy(strategy: Strategy | Mapping[str, Configuration]) -> Strategy:
    """`strategy` itself, or a Strategy of a per-op mapping (no reuse choices)."""
    return strategy if isinstance(strategy, Strategy) else Strategy(strategy)


def check_strategy(graph, strategy: Any) -> None:
    if not isinstance(strategy, Mapping):
        raise ConfigError("strategy is not valid", expected="a Strategy or a mapping from op name to Configuration",
                          got=type(strategy).__name__)
    names = [op.name for op in graph.ops]
    missing = [name for name in names if name not in strategy]
    if missing:
        raise ConfigError("strategy lacks ops", expected="a configuration for every op",
                          got=f"none for {_some(missing)}")
    unknown = sorted(set(strategy) - set(names))
    if unknown:
        raise ConfigError(f"strategy names ops graph {graph.name!r} does not have", expected="the graph's op names",
                          got=_some(unknown), hint=closest(unknown[0], names))
    wrong = [name for name, config in strategy.items() if not isinstance(config, Configuration)]
    if wrong:
        raise ConfigError("strategy has values that are not configurations", expected="a Configuration per op",
                          got=f"{type(strategy[wrong[0]]).__name__} for {_some(wrong)}")


def pipeline_of(strategy: Mapping[str, Configuration]) -> Pipeline | None:
    """The strategy's pipeline (None for a plain per-op mapping or a strategy without stages)."""
    return strategy.pipeline if isinstance(strategy, Strategy) else None


def reuse_of(strategy: Mapping[str, Configuration]) -> Mapping[Edge, str]:
    """The strategy's reuse choices (none for a plain per-op mapping)."""
    return strategy.reuse if isinstance(strategy, Strategy) else {}


def check_reuse(edges, reuse: Mapping[Edge, str]) -> None:
    """Every reuse choice names one of `edges` (the cost model's edges)."""
    unknown = set(reuse) - set(edges) if reuse else ()
    if unknown:
        raise ConfigError("reuse choices name edges the graph does not have",
                          expected="(tensor, source op, consumer op) of an edge of the graph",
                          got=", ".join(str(k) for k in sorted(unknown, key=str)[:3]))


def _some(names: list[str]) -> str:
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f"{names[:5]}{more}"
