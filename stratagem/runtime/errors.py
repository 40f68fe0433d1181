"""Errors of the runtime: plans it refuses, and runs that fail."""

from __future__ import annotations

from stratagem.errors import StratagemError


class NotRunnable(StratagemError):
    """A plan the runtime refuses before launching anything (check_runnable names the ops)."""


class RunFailed(StratagemError):
    """A launched run that did not finish: a rank died, timed out, or disagreed with the reference."""


class ExecutionError(StratagemError):
    """A plan, module or world that does not fit together at start-up."""
