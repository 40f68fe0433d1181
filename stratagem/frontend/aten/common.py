"""Reading fx nodes of an exported graph: arguments by schema name, shapes, dtypes."""

from __future__ import annotations

import operator
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from stratagem.ir.attrs import freeze


@dataclass(frozen=True)
class Intermediate:
    index: int          # position of the producing op in the list convert() returned


@dataclass(frozen=True)
class Converted:
    kind: str                          # TDL library op name
    inputs: tuple[Any, ...]            # fx.Node or Intermediate, in the TDL op's input order
    attrs: dict[str, Any] = field(default_factory=dict)
    produces: int | None = 0
    writes: Any = None                 # fx.Node of a buffer whose next value this op computes (state.py)


Converter = Callable[[torch.fx.Node], "list[Converted] | None"]


def bind(node: torch.fx.Node) -> dict[str, Any]:
    """The node's arguments by schema name, defaults filled in."""
    schema = node.target._schema
    values: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args) and not arg.kwarg_only:
            values[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            values[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            values[arg.name] = arg.default_value
        else:
            values[arg.name] = None
    return values


def is_tensor(value: Any) -> bool:
    return isinstance(value, torch.fx.Node) and isinstance(value.meta.get("val"), torch.Tensor)


def shape(value: torch.fx.Node) -> tuple[int, ...]:
    return tuple(int(s) for s in value.meta["val"].shape)


def dtype_name(value: torch.fx.Node) -> str:
    return str(value.meta["val"].dtype).replace("torch.", "")


def is_floating(value: torch.fx.Node) -> bool:
    return value.meta["val"].dtype.is_floating_point


def out_shape(node: torch.fx.Node) -> tuple[int, ...]:
    return shape(node)


def one(kind: str, inputs: Sequence[Any], produces: int | None = 0, **attrs: Any) -> list[Converted]:
    """A single library op, its trailing absent (None) optional inputs dropped."""
    inputs = list(inputs)
    while inputs and inputs[-1] is None:
        inputs.pop()
    if any(i is None for i in inputs):
        return None            # a missing input before a present one has no place in a graph op
    return [Converted(kind, tuple(inputs), {k: freeze(v) for k, v in attrs.items()}, produces)]


def ints(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in (value if isinstance(value, (list, tuple)) else [value]))


def seed_of(node: torch.fx.Node) -> int:
    """A per-node seed (from its name), so each dropout site draws its own mask."""
    return zlib.crc32(node.name.encode()) & 0xFFFFF


def other_elements_used(node: torch.fx.Node, produced: Sequence[int]) -> bool:
    """Whether an element of a tuple-valued node that the conversion does not produce feeds a
    computation (uses by the graph output, e.g. running-statistics updates, do not count)."""
    for user in node.users:
        if user.op == "call_function" and user.target is operator.getitem:
            if user.args[1] not in produced and any(u.op != "output" for u in user.users):
                return True
    return False


def overload_exists(name: str, overload: str) -> bool:
    packet = getattr(torch.ops.aten, name, None)
    return packet is not None and overload in packet.overloads()
