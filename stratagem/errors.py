"""Errors that say what was expected, what came instead, and what to do."""

from __future__ import annotations


def _compose(what: str, expected: str | None, got: str | None, hint: str | None) -> str:
    facts = [f"expected {expected}" if expected is not None else "",
             f"got {got}" if got is not None else ""]
    facts_text = ", ".join(f for f in facts if f)
    message = f"{what}: {facts_text}" if facts_text else what
    return f"{message}. {hint}" if hint else message


class StratagemError(Exception):
    """Base error. Message: `<what>: expected <expected>, got <got>. <hint>`."""

    def __init__(self, what: str, *, expected: str | None = None, got: str | None = None,
                 hint: str | None = None):
        super().__init__(_compose(what, expected, got, hint))
        self.what, self.expected, self.got, self.hint = what, expected, got, hint


class TDLError(StratagemError):
    """An operator description that the TDL cannot analyze."""


class GraphError(StratagemError):
    """A graph that fails the IR checker."""


class ConfigError(StratagemError):
    """A configuration, cluster or plan file that is not valid."""
