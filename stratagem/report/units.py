"""Memory sizes from text, and bytes and seconds as text.

    parse_bytes("16GB") = 16e9    parse_bytes("14.5GiB") = 14.5 * 2**30    parse_bytes("2e10") = 2e10
Decimal units (kB, MB, GB, TB) are powers of 1000, binary ones (KiB, MiB, GiB, TiB) powers of 1024;
a bare number is bytes.
"""

from __future__ import annotations

import math
import re

from stratagem.errors import ConfigError

UNIT_BYTES = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
              "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40}
_SIZE = re.compile(r"^\s*(?P<number>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(?P<unit>[a-zA-Z]*)\s*$")


def parse_bytes(text: str) -> float:
    match = _SIZE.match(str(text))
    unit = match["unit"].lower() if match else None
    if not match or unit not in UNIT_BYTES:
        raise ConfigError("memory size not understood", expected="a number with an optional unit, "
                          "e.g. 16GB, 14.5GiB, 512MiB or 2e10 (bytes)", got=repr(text))
    value = float(match["number"]) * UNIT_BYTES[unit]
    if value <= 0 or not math.isfinite(value):
        raise ConfigError("memory size must be positive", got=repr(text))
    return value


def format_bytes(num_bytes: float) -> str:
    if num_bytes != num_bytes:
        return "-"
    for unit, size in (("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if abs(num_bytes) >= size:
            return f"{num_bytes / size:.2f} {unit}"
    return f"{num_bytes:.0f} B"


def format_seconds(time_s: float) -> str:
    if time_s != time_s:
        return "-"
    magnitude = abs(time_s)
    if magnitude >= 1:
        return f"{time_s:.3g} s" if magnitude < 100 else f"{time_s:.0f} s"
    if magnitude >= 1e-3:
        return f"{time_s * 1e3:.3g} ms"
    return f"{time_s * 1e6:.3g} us"


def format_delta(before: float, after: float, formatter=format_seconds) -> str:
    """`after - before` with its sign, and the relative change."""
    delta = after - before
    sign = "+" if delta >= 0 else "-"
    relative = f" ({delta / before:+.1%})" if before else ""
    return f"{sign}{formatter(abs(delta))}{relative}"
