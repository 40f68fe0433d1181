"""Frozen, hashable operator attributes (lists become tuples), so analyses can be cached by them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


def freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, Mapping):
        return Attrs(value)
    return value


class Attrs(Mapping):
    """An immutable mapping of attribute name to plain value."""

    __slots__ = ("_items", "_hash", "_index")

    def __init__(self, items: Mapping[str, Any] | None = None, **kwargs: Any):
        merged = {**(items or {}), **kwargs}
        self._items = tuple(sorted((k, freeze(v)) for k, v in merged.items()))
        self._hash = hash(self._items)
        self._index = dict(self._items)     # lookups in O(1): a graph's meta maps thousands of op names

    def __getitem__(self, key: str) -> Any:
        return self._index[key]

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def get(self, key: str, default: Any = None) -> Any:
        return self._index.get(key, default)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Attrs) and self._items == other._items

    def __repr__(self) -> str:
        return "Attrs(" + ", ".join(f"{k}={v!r}" for k, v in self._items) + ")"

    def to_json(self) -> dict[str, Any]:
        return {k: _jsonable(v) for k, v in self._items}


def _jsonable(value: Any) -> Any:
    if isinstance(value, Attrs):
        return value.to_json()
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value
