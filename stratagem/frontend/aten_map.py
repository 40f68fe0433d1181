"""ATen -> TDL: which library op (and attributes) describes each ATen op that export produces.

`convert(node)` takes a call_function node of an exported FX graph and returns the library ops
that describe it, or None when the TDL has no description (capture then makes it `opaque`).
A node whose ATen op returns several tensors (split, chunk, unbind) yields one Converted per
output, each with `output_index` naming the element of the tuple it produces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Converted:
    kind: str                          # TDL library op name
    inputs: tuple[Any, ...]            # fx.Node tensor arguments, in the TDL op's order
    attrs: dict[str, Any] = field(default_factory=dict)
    output_index: int | None = None    # element of the node's tuple output; None: the single output


def convert(node: Any) -> list[Converted] | None:
    return None
