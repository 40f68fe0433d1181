"""Values from users, checked: one function per kind of value, called by the CLI, the Python API
and the file loaders alike, so a bad value gets the same message whichever way it comes in.

    integer(value, "devices", minimum=1, maximum=16)      an int (not a bool, not 2.0)
    positive(value, "budget_s")                           a finite number > 0
    non_negative(value, "latency_s")                      a finite number >= 0
    size_bytes(value, "memory cap")                       bytes > 0: a number, or text such as 16GB
    one_of(value, "mode", known)                          one of the names, else the closest named
Zero and negative values are values: each function takes `None` to mean absent only where its
caller defaults it (`None if value is None else integer(...)`), never `value or default`.

Sizes as text: decimal units (kB, MB, GB, TB) are powers of 1000, binary ones (KiB, MiB, GiB, TiB)
powers of 1024; a bare number is bytes: size_bytes("16GB", ...) = 16e9, "14.5GiB" = 14.5 * 2**30,
"2e10" = 2e10.
"""

from __future__ import annotations

import difflib
import math
import numbers
import re
from collections.abc import Iterable
from typing import Any

from stratagem.errors import ConfigError

UNIT_BYTES = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
              "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40}
SIZE_EXAMPLES = "e.g. 16GB, 14.5GiB, 512MiB or 2e10 (bytes)"
_SIZE = re.compile(r"^\s*(?P<number>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(?P<unit>[a-zA-Z]*)\s*$")
_NEGATIVE_SIZE = re.compile(r"^\s*-")


def invalid(what: str, expected: str, value: Any, hint: str | None = None) -> ConfigError:
    return ConfigError(f"{what} is not valid", expected=expected, got=repr(value), hint=hint)


def integer(value: Any, what: str, minimum: int = 1, maximum: int | None = None) -> int:
    expected = f"an integer >= {minimum}" if maximum is None else f"an integer in {minimum}..{maximum}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise invalid(what, expected, value)
    if value < minimum or (maximum is not None and value > maximum):
        raise invalid(what, expected, value)
    return int(value)


def _real(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    return float(value)


def positive(value: Any, what: str) -> float:
    number = _real(value)
    if number is None or not math.isfinite(number) or number <= 0:
        raise invalid(what, "a finite number > 0", value)
    return number


def non_negative(value: Any, what: str) -> float:
    number = _real(value)
    if number is None or not math.isfinite(number) or number < 0:
        raise invalid(what, "a finite number >= 0", value)
    return number


def size_bytes(value: Any, what: str) -> float:
    """Bytes > 0, finite: a number, or text with a unit (16GB, 14.5GiB, 2e10)."""
    number = _real(value) if not isinstance(value, str) else _text_bytes(value)
    if number is None or not math.isfinite(number) or number <= 0:
        raise invalid(what, f"a size > 0, {SIZE_EXAMPLES}", value)
    return number


def _text_bytes(text: str) -> float | None:
    match = _SIZE.match(text)
    unit = match["unit"].lower() if match else None
    if not match or unit not in UNIT_BYTES:
        return -1.0 if _NEGATIVE_SIZE.match(text) else None
    return float(match["number"]) * UNIT_BYTES[unit]


def closest(value: Any, known: Iterable[str]) -> str | None:
    """'Did you mean ...?' for a misspelt name, or None when nothing is close."""
    close = difflib.get_close_matches(str(value), list(known), n=3, cutoff=0.6)
    return f"Did you mean {' or '.join(close)}?" if close else None


def one_of(value: Any, what: str, known: Iterable[str]) -> str:
    names = list(known)
    if not isinstance(value, str) or value not in names:
        raise ConfigError(f"unknown {what} {value!r}", expected=f"one of {', '.join(names)}", got=repr(value),
                          hint=closest(value, names))
    return value
