"""Running the CLI in-process for the bad-input suite: exit code and what it printed, with the
checks every case makes (exit code 2, `stratagem <command>: error: ...`, no traceback)."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

from stratagem.cli import main


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


def cli(*argv: str) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as stop:          # argparse refusing a value
            code = stop.code
    return Outcome(code, out.getvalue(), err.getvalue())


def refused(*argv: str) -> str:
    """The error line of a command that must refuse its input; asserts the form of the refusal."""
    found = cli(*argv)
    assert "Traceback" not in found.err + found.out, found.err
    assert found.code == 2, (found.code, found.out, found.err)
    errors = [line for line in found.err.splitlines() if line.startswith(f"stratagem {argv[0]}: error: ")]
    assert len(errors) == 1, found.err
    return errors[0]


def assert_says(text: str, *fragments: str) -> None:
    missing = [f for f in fragments if f not in text]
    assert not missing, f"{missing} not in: {text}"
