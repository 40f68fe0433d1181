"""A strategy (one configuration per op) checked against its graph: every op named once, each with
a Configuration, and no op the graph does not have. The cost model, the simulator and plan files
all call `check_strategy`, so a strategy that misses or invents an op is refused the same way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stratagem.errors import ConfigError
from stratagem.space.config import Configuration
from stratagem.values import closest


def check_strategy(graph, strategy: Any) -> None:
    if not isinstance(strategy, Mapping):
        raise ConfigError("strategy is not valid", expected="a mapping from op name to Configuration",
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


def _some(names: list[str]) -> str:
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f"{names[:5]}{more}"
