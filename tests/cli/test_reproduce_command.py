"""`stratagem reproduce`: every reproduction in its quick mode writes its Markdown page, its CSV and
its figure; a reproduction whose search is not registered yet says so and shows no numbers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import stratagem
from stratagem.cli import main
from stratagem.report.reproduce import reproductions

from .images import assert_drawn

NAMES = ("tensoropt-fig6", "tensoropt-fig7", "tensoropt-fig8", "tensoropt-table3", "flexflow-fig6",
         "flexflow-table5", "flexflow-fig9b", "tofu-table1", "tofu-fig10")
WITH_FIGURE = {"tensoropt-fig6", "tensoropt-fig7", "tensoropt-fig8", "flexflow-fig6", "flexflow-fig9b", "tofu-fig10"}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    root = Path(stratagem.__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.run([sys.executable, "-m", "stratagem", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_the_entry_point_lists_every_reproduction():
    done = run_cli("reproduce", "--list")
    assert done.returncode == 0, done.stderr
    listed = [line.split()[0] for line in done.stdout.splitlines()[1:] if line.strip()]
    assert tuple(listed) == NAMES == tuple(reproductions())


def test_no_name_is_an_error_after_the_list(capsys):
    assert main(["reproduce"]) == 2
    captured = capsys.readouterr()
    assert "tofu-fig10" in captured.out and "expected a name from the list above" in captured.err


@pytest.mark.parametrize("name", NAMES)
def test_quick_reproduction_writes_its_page(name, tmp_path, capsys):
    assert main(["reproduce", name, "--quick", "--out", str(tmp_path)]) == 0
    page = (tmp_path / f"{name}.md").read_text()
    missing = reproductions()[name].missing()
    if missing:
        assert page.splitlines()[2].startswith("Pending") and all(m in page for m in missing)
        assert not (tmp_path / f"{name}.png").exists() and not (tmp_path / f"{name}.csv").exists()
        return
    assert f"`stratagem reproduce {name} --quick`" in page
    header = (tmp_path / f"{name}.csv").read_text().splitlines()[0]
    assert header.split(",")[0] and f"| {header.split(',')[0]} |" in page
    if name in WITH_FIGURE:
        assert f"]({name}.png)" in page
        assert_drawn(tmp_path / f"{name}.png")
