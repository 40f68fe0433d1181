"""Bytes and seconds as text (sizes from text: stratagem.values.size_bytes)."""

from __future__ import annotations


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
