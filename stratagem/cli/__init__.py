"""`stratagem` command line: one module per command under stratagem.cli, imported on use.

`main` runs a command and returns its exit code (tests and programs call it); `entry` is the
installed command (and `python -m stratagem`): `main`, then the exit without the interpreter's
teardown (`exit_now`).
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import sys

from stratagem.cli.stopping import EXIT_ABORTED, Aborted
from stratagem.collection import fewer_collections
from stratagem.errors import StratagemError
from stratagem.files import writable_output

# command name -> (module under stratagem.cli, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "models": ("models", "list the model zoo"),
    "clusters": ("clusters", "list cluster presets"),
    "ops": ("ops", "list the TDL operator library with derived splits"),
    "plan": ("plan", "find a strategy for a model on a cluster"),
    "frontier": ("frontier", "the time / peak-memory frontier of a model on a cluster"),
    "simulate": ("simulate", "simulate a plan file"),
    "explain": ("explain", "per-op configuration, time, memory and communication of a plan"),
    "diff": ("diff", "compare two plans"),
    "run": ("run", "run a plan on torch.distributed"),
    "validate": ("validate", "measured against predicted time and memory of a plan"),
    "profile": ("profile", "measure op times or collective bandwidths on this machine"),
    "reproduce": ("reproduce", "regenerate the papers' figures on simulated clusters"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stratagem", description=__doc__.split(":")[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        try:
            mod = importlib.import_module(f"stratagem.cli.{module}")
        except ModuleNotFoundError as error:
            if error.name != f"stratagem.cli.{module}":
                raise
            continue
        command = sub.add_parser(name, help=help_text, description=help_text)
        mod.configure(command)
        command.set_defaults(handler=mod.run, outputs=getattr(mod, "OUTPUTS", ()))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        check_outputs(args)
        with fewer_collections():
            return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        print(f"stratagem {args.command}: interrupted (Ctrl-C)", file=sys.stderr)
        return EXIT_ABORTED
    except Aborted:
        print(f"stratagem {args.command}: aborted (Ctrl-C twice); no file was left half-written", file=sys.stderr)
        return EXIT_ABORTED
    except StratagemError as error:
        code = getattr(error, "exit_code", 2)       # a run stopped by a signal: 128 + its number
        print(f"stratagem {args.command}: {'error: ' if code == 2 else ''}{error}", file=sys.stderr)
        return code


def entry() -> None:
    """The `stratagem` command: `main`, then `exit_now` with its code."""
    exit_now(main())


def exit_now(code: int) -> None:
    """Exit with `code` once the exit handlers ran and stdout and stderr are flushed, without
    tearing down the interpreter: a plan leaves millions of objects (the cost model's tables and
    caches) that Python would free one by one, 2 s after the Transformer's plan. Every file a
    command writes is closed (and renamed into place) before `main` returns."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):      # closed or broken pipe: nothing more can be said there
            pass
    os._exit(code)


def check_outputs(args: argparse.Namespace) -> None:
    """Every file the command will write can be written: found now, not after the work."""
    for dest, what, suffixes in args.outputs:
        writable_output(getattr(args, dest, None), what, suffixes)


if __name__ == "__main__":
    entry()
