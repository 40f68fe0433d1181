"""Reading fields of a parsed file (a cluster file, a plan file), with errors that name the field
and the file. Each kind of value is checked by stratagem.values, as the CLI and the API check it.

    top = Fields.of(data, "cluster.yaml")
    top.integer("nodes"), top.number("latency_s", positive=False), top.sub("device").text("kind")
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stratagem import values
from stratagem.errors import ConfigError


@dataclass(frozen=True)
class Fields:
    """A mapping from a file, and where it is (`source`, dotted `path`)."""

    data: Mapping[str, Any]
    source: str
    path: str = ""

    @staticmethod
    def of(value: Any, source: str, path: str = "") -> "Fields":
        if not isinstance(value, Mapping):
            raise ConfigError(f"{source}: field '{path or '<top>'}' is not a mapping",
                              expected="key: value pairs", got=type(value).__name__,
                              hint=f"Check the structure (and indentation) of {source}")
        return Fields(value, source, path)

    def where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path and key else self.path or key

    def named(self, key: str) -> str:
        return f"{self.source}: field '{self.where(key)}'"

    def error(self, key: str, expected: str, got: Any, hint: str | None = None) -> ConfigError:
        return values.invalid(self.named(key), expected, got, hint)

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = ...) -> Any:
        if key in self.data:
            return self.data[key]
        if default is ...:
            raise ConfigError(f"{self.named(key)} is missing",
                              expected=f"a value for '{key}'", got=f"keys {sorted(self.data)}")
        return default

    def sub(self, key: str) -> "Fields":
        return Fields.of(self.raw(key), self.source, self.where(key))

    def number(self, key: str, default: Any = ..., positive: bool = True) -> float:
        value = self.raw(key, default)
        return self.as_number(key, value, positive)

    def as_number(self, key: str, value: Any, positive: bool = True) -> float:
        check = values.positive if positive else values.non_negative
        return check(_float_spelling(value), self.named(key))

    def size(self, key: str) -> float:
        """Bytes > 0: a number or text such as 16GB."""
        return values.size_bytes(self.raw(key), self.named(key))

    def integer(self, key: str, default: Any = ..., minimum: int = 1) -> int:
        return values.integer(self.raw(key, default), self.named(key), minimum)

    def text(self, key: str, default: Any = ...) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str) or not value:
            raise self.error(key, "a non-empty string", value)
        return value

    def boolean(self, key: str, default: Any = ...) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise self.error(key, "true or false", value)
        return value

    def sequence(self, key: str, default: Any = ...) -> list[Any]:
        value = self.raw(key, default)
        if not isinstance(value, (list, tuple)):
            raise self.error(key, "a list", value)
        return list(value)

    def number_table(self, key: str) -> tuple[tuple[str, float], ...]:
        table = self.sub(key)
        if not table.data:
            raise self.error(key, "at least one dtype: peak entry", {})
        return tuple((str(k), table.as_number(str(k), v)) for k, v in table.data.items())

    def check_known(self, known: set[str]) -> None:
        unknown = sorted(set(self.data) - known)
        if unknown:
            raise ConfigError(f"{self.source}: unknown field '{self.where(unknown[0])}'",
                              expected=f"one of {sorted(known)}", got=repr(unknown[0]),
                              hint=values.closest(unknown[0], known) or "Check the spelling")


def _float_spelling(value: Any) -> Any:
    """PyYAML reads 25.0e9 (no exponent sign) as a string: any spelling float() takes is a number."""
    if not isinstance(value, str):
        return value
    try:
        return float(value)
    except ValueError:
        return value
