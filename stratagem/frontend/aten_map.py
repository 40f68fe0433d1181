"""ATen -> TDL: which library ops (and attributes) describe each ATen op that export produces.

`convert(node)` takes a call_function node of an exported FX graph and returns the library ops that
compute it, in order, or None when the TDL has no description (capture then makes it `opaque`).
One node may become a chain: an input of a `Converted` is either an fx.Node of the exported graph
or `Intermediate(k)`, the output of the k-th op of the same list. `produces` says which element of
the node's output an op yields: 0 for a single-tensor node, i for element i of a tuple output
(split, chunk, unbind), None for an intermediate of the chain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Intermediate:
    index: int          # position of the producing op in the list convert() returned


@dataclass(frozen=True)
class Converted:
    kind: str                          # TDL library op name
    inputs: tuple[Any, ...]            # fx.Node or Intermediate, in the TDL op's input order
    attrs: dict[str, Any] = field(default_factory=dict)
    produces: int | None = 0


def convert(node: Any) -> list[Converted] | None:
    return None
