"""The installed command (`stratagem.cli.entry`, also `python -m stratagem`): what `main` says and
returns reaches the caller, exit handlers run, and the interpreter's teardown is skipped."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from stratagem.cli import main

# A program that runs the command as the installed script does, with an exit handler and an object
# whose finaliser would speak at teardown (skipped by exit_now, so it must stay silent).
PROGRAM = """
import atexit, sys
from stratagem.cli import entry
class Loud:
    def __del__(self):
        print("torn down", flush=True)
keep = Loud()
atexit.register(lambda: print("exit handler ran"))
sys.argv = ["stratagem", *sys.argv[1:]]
entry()
"""


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROGRAM, *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))


def test_entry_prints_everything_runs_exit_handlers_and_skips_teardown(capsys):
    done = _run("clusters")
    assert done.returncode == 0, done.stderr
    assert main(["clusters"]) == 0
    assert done.stdout.startswith(capsys.readouterr().out)          # all of it, flushed
    assert "exit handler ran" in done.stdout
    assert "torn down" not in done.stdout


@pytest.mark.parametrize("args, code, said", [(("plan", "no-such-model"), 2, "no model 'no-such-model'"),
                                              ((), 2, "usage: stratagem")])
def test_entry_exits_with_mains_code_and_its_message(args, code, said):
    done = _run(*args)
    assert done.returncode == code
    assert said in done.stderr + done.stdout


def test_python_dash_m_uses_the_entry():
    done = subprocess.run([sys.executable, "-m", "stratagem", "plan", "no-such-model"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "no model 'no-such-model'" in done.stderr
