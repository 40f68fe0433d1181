"""Reading a user's file as text, JSON or YAML, with errors that say which file, and where in it
(line and column), instead of a traceback. A key given twice in one mapping is an error (JSON and
YAML parsers otherwise keep the last one silently).

    text = read_text(path, "plan file")
    data = parse_json(text, path)         data = parse_yaml(text, path)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from stratagem.errors import ConfigError


def read_text(path: str | Path, what: str) -> str:
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"no such {what} {str(path)!r}") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {str(path)!r} is a directory", expected="a file") from None
    except OSError as error:
        raise ConfigError(f"{what} {str(path)!r} cannot be read", got=error.strerror or str(error)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{what} {str(path)!r} is not a text file", expected="UTF-8 text (JSON or YAML)",
                          got=f"byte {data[error.start]:#04x} at offset {error.start}") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(ValueError):
    pass


def parse_json(text: str, source: str | Path) -> Any:
    if not text.strip():
        raise ConfigError(f"{source} is empty", expected="a JSON object")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{source} is not valid JSON",
                          got=f"{error.msg} at line {error.lineno}, column {error.colno}") from None
    except _DuplicateKey as error:
        raise ConfigError(f"{source} gives a key twice", expected="each key once per object",
                          got=f"{error.args[0]!r} twice") from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.safe_load, refusing a key given twice in one mapping."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, (str, int, float)):
                    continue
                if key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"key {key!r} given twice",
                                                            key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep)


def parse_yaml(text: str, source: str | Path) -> Any:
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as error:
        raise ConfigError(f"{source} is not valid YAML", got=yaml_problem(error)) from None
    if data is None:
        raise ConfigError(f"{source} is empty", expected="key: value pairs")
    return data


def yaml_problem(error: yaml.YAMLError) -> str:
    """PyYAML's problem with its line and column (1-based), e.g. 'mapping values are not
    allowed here at line 3, column 19'."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    context = getattr(error, "context", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}" + (f" ({context})" if context else "")
