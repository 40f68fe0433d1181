"""Helpers for the torch implementations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def optional(inputs: Sequence[Any], i: int) -> Any:
    """Input i, or None when the op was given fewer inputs (an absent optional tensor)."""
    return inputs[i] if i < len(inputs) else None
