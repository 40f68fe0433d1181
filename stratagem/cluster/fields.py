"""Reading fields of a parsed cluster file, with errors that name the field and the file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stratagem.errors import ConfigError


@dataclass(frozen=True)
class Fields:
    """A mapping from a cluster file, and where it is (`source`, dotted `path`)."""

    data: Mapping[str, Any]
    source: str
    path: str = ""

    @staticmethod
    def of(value: Any, source: str, path: str = "") -> "Fields":
        if not isinstance(value, Mapping):
            raise ConfigError(f"{source}: field '{path or '<top>'}' is not a mapping",
                              expected="key: value pairs", got=type(value).__name__,
                              hint="Check the indentation of the cluster file")
        return Fields(value, source, path)

    def where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, expected: str, got: Any, hint: str | None = None) -> ConfigError:
        return ConfigError(f"{self.source}: field '{self.where(key)}' is not valid",
                           expected=expected, got=repr(got), hint=hint)

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = ...) -> Any:
        if key in self.data:
            return self.data[key]
        if default is ...:
            raise ConfigError(f"{self.source}: field '{self.where(key)}' is missing",
                              expected=f"a value for '{key}'", got=f"keys {sorted(self.data)}")
        return default

    def sub(self, key: str) -> "Fields":
        return Fields.of(self.raw(key), self.source, self.where(key))

    def number(self, key: str, default: Any = ..., positive: bool = True) -> float:
        value = self.raw(key, default)
        return self.as_number(key, value, positive)

    def as_number(self, key: str, value: Any, positive: bool = True) -> float:
        # PyYAML reads 25.0e9 (no exponent sign) as a string; accept any float spelling.
        try:
            number = float(value) if not isinstance(value, bool) else None
        except (TypeError, ValueError):
            number = None
        if number is None or number != number or (positive and number <= 0) or number < 0:
            kind = "a positive number" if positive else "a number >= 0"
            raise self.error(key, kind, value)
        return number

    def integer(self, key: str, default: Any = ..., minimum: int = 1) -> int:
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(key, f"an integer >= {minimum}", value)
        return value

    def text(self, key: str, default: Any = ...) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str) or not value:
            raise self.error(key, "a non-empty string", value)
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
                              hint="Check the spelling; see stratagem/cluster/presets/*.yaml")
