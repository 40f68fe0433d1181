"""Element types by name, and their sizes in bytes (the planner core does not import torch)."""

from __future__ import annotations

from types import MappingProxyType

from stratagem.errors import GraphError

DTYPE_BYTES = MappingProxyType({
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
    "complex64": 8, "complex128": 16,
})

FLOATING = frozenset({"float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"})


def dtype_bytes(dtype: str) -> int:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise GraphError("unknown dtype", expected=f"one of {sorted(DTYPE_BYTES)}", got=repr(dtype),
                         hint="Use the torch dtype name without the 'torch.' prefix") from None
