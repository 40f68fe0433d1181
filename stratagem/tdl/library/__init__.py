"""The operator library: every op declared once, by what it computes."""

from __future__ import annotations

from types import MappingProxyType, ModuleType

from stratagem.tdl.library import (
    activation, binary, conv, create, index, linalg, loss, nn, norm, opaque, pad, pool, reduce, scalar,
    scatter, shape, unary,
)
from stratagem.tdl.trace import OpDef

_MODULES: tuple[ModuleType, ...] = (unary, activation, binary, scalar, linalg, conv, pool, norm,
                                    reduce, nn, loss, shape, index, pad, scatter, create, opaque)


def _collect(modules: tuple[ModuleType, ...]) -> dict[str, OpDef]:
    found: dict[str, OpDef] = {}
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, OpDef):
                if value.name in found and found[value.name] is not value:
                    raise RuntimeError(f"op {value.name!r} declared twice")
                found[value.name] = value
    return dict(sorted(found.items()))


LIBRARY = MappingProxyType(_collect(_MODULES))
