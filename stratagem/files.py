"""Reading a user's file as text, JSON or YAML, with errors that say which file, and where in it
(line and column), instead of a traceback. A key given twice in one mapping is an error (JSON and
YAML parsers otherwise keep the last one silently).

    text = read_text(path, "plan file")
    data = parse_json(text, path)         data = parse_yaml(text, path)

Writing: `atomic_write_text` / `atomic_write_json` (whole or not at all, umask permissions, through
symbolic links) and `writable_output` (an output path checked before any work).
"""

from __future__ import annotations

import json
import os
import tempfile
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


# ---- writing ----------------------------------------------------------------------------------
# A file is written whole or not at all (a temporary file beside it, renamed into place), with the
# permissions the user's umask gives a new file (not mkstemp's 0600), and through a symbolic link
# to its target (a rename would replace the link itself). `writable_output` checks a command's
# output before any work, so a bad -o is found in a second, not after an hour of planning.

def write_target(path: str | Path) -> Path:
    """Where writing `path` lands: the file a symbolic link points to, else the path itself."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def atomic_write_text(path: str | Path, text: str) -> None:
    target = write_target(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as error:
        raise _unwritable(path, error) from None
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, _new_file_mode(target))
        os.replace(tmp, target)
    except BaseException as error:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise _unwritable(path, error) from None
        raise


def _unwritable(path: str | Path, error: OSError) -> ConfigError:
    return ConfigError(f"{str(path)!r} cannot be written", got=error.strerror or str(error),
                       hint="Choose another path")


def atomic_write_json(path: str | Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, allow_nan=True) + "\n")


def _new_file_mode(target: Path) -> int:
    """An existing file keeps its mode; a new one gets 0o666 less the umask, as open() would."""
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def writable_output(path: str | Path | None, what: str, suffixes: tuple[str, ...] = ()) -> None:
    """Refuse, before any work, an output path that cannot be written: a directory, an unwritable
    file or directory, a parent that cannot be created, or a suffix the writer cannot produce."""
    if path is None:
        return
    target = write_target(path)
    if suffixes and target.suffix.lower() not in suffixes:
        raise ConfigError(f"{what} {str(path)!r} has an unsupported suffix", expected=" or ".join(suffixes),
                          got=repr(target.suffix or "none"), hint=f"Name the file e.g. out{suffixes[0]}")
    if target.is_dir():
        raise ConfigError(f"{what} {str(path)!r} is a directory", expected="a file name",
                          hint=f"Give a file inside it, e.g. {target / ('out' + (suffixes[0] if suffixes else '.json'))}")
    directory = _nearest_existing(target.parent)
    if not directory.is_dir():
        raise ConfigError(f"{what} {str(path)!r} cannot be created", got=f"{directory} is not a directory")
    try:                       # a probe, not os.access: root passes access checks on read-only places
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".stratagem-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        raise ConfigError(f"{what} {str(path)!r} cannot be written", got=f"{directory}: {error.strerror or error}",
                          hint="Choose another path") from None
    if target.exists() and not os.access(target, os.W_OK):
        raise ConfigError(f"{what} {str(path)!r} cannot be written", got="the file is read-only",
                          hint="Choose another path, or make it writable")


def _nearest_existing(directory: Path) -> Path:
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent
    return directory


def writable_directory(path: str | Path | None, what: str) -> None:
    """Refuse, before any work, a directory that cannot be created or written into."""
    if path is None:
        return
    directory = Path(path)
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"{what} {str(path)!r} is not a directory", got="a file", hint="Give a directory")
    writable_output(directory / ".stratagem-probe", what)
