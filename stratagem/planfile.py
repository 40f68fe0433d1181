"""Plan files as the commands read them: a plan file, or one plan of a frontier file (`front.json:3`),
with errors that say which command writes what.

    plan = load_plan("plan.json")          # written by `stratagem plan -o`
    plan = load_plan("frontier.json:0")    # the least-memory plan of `stratagem frontier -o`
"""

from __future__ import annotations

from pathlib import Path

from stratagem.errors import ConfigError
from stratagem.plan import Frontier, Plan, read_json

MAKE_ONE = "Write one with `stratagem plan MODEL -o plan.json`"


def split_index(text: str) -> tuple[Path, int | None]:
    """"front.json:3" -> (front.json, 3); a path with no ":<int>" suffix -> (path, None)."""
    head, sep, tail = str(text).rpartition(":")
    if sep and tail.lstrip("-").isdigit() and head:
        return Path(head), int(tail)
    return Path(text), None


def load_plan(text: str) -> Plan:
    path, index = split_index(text)
    if not path.exists():
        raise ConfigError(f"no plan file {str(path)!r}", expected="a plan file", got="no such file",
                          hint=MAKE_ONE)
    data = read_json(path)
    if isinstance(data, dict) and "plans" in data:
        return _frontier_plan(path, index)
    if index is not None:
        raise ConfigError(f"{path} is a plan file, not a frontier file", expected="no :INDEX after a plan file",
                          got=f":{index}", hint=f"Give {path} alone")
    return Plan.from_dict(data, source=str(path))


def _frontier_plan(path: Path, index: int | None) -> Plan:
    front = Frontier.load(path)
    if index is None:
        raise ConfigError(f"{path} is a frontier file ({len(front)} plans)", expected="one plan",
                          got="a frontier", hint=f"Pick one as {path}:INDEX, 0 (least memory) to "
                                             f"{len(front) - 1} (least time), or {MAKE_ONE[0].lower()}{MAKE_ONE[1:]}")
    if not -len(front) <= index < len(front):
        raise ConfigError(f"no plan {index} in {path}", expected=f"0..{len(front) - 1}", got=str(index))
    return front[index]
